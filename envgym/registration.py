"""The envgym registry: versioned environment ids, variants, and ``make`` functions.

Single-agent environments live in Gymnasium's own registry under the ``envgym/`` namespace, so
``gymnasium.make("envgym/Sokoban-v0")`` works (see :mod:`envgym._autoregister` for how that
happens without importing envgym first). Multi-agent PettingZoo environments live in envgym's
registry and are built with :func:`make_aec` / :func:`make_parallel`.

Environment families declare their specs as data: each package under ``envgym.environments``
(and each module named by an ``envgym.environments`` entry point of another distribution) has a
``SPECS`` list of :class:`EnvSpec` with *string* entry points, so registering every environment
imports no environment code.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import re
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from envgym.errors import EnvgymError, UnknownEnvError, suggest

__all__ = ["EnvSpec", "list_envs", "make", "make_aec", "make_parallel", "register", "register_envs", "spec"]

logger = logging.getLogger(__name__)

Kind = Literal["gymnasium", "aec", "parallel"]
ENV_ID = re.compile(r"^(?P<namespace>[\w.-]+)/(?P<name>[\w.-]+?)-v(?P<version>\d+)$")
#: Ids that name an environment by its address, not a registry entry: ``SCHEME:ADDRESS``
#: (``openenv:http://127.0.0.1:8000``) is the scheme's entry point called with ``url=ADDRESS``.
ADDRESS_SCHEMES: dict[str, str] = {"openenv": "envgym.integrations.openenv:OpenEnvEnv"}
ADDRESS_ID = re.compile(r"^(?P<scheme>[a-z]+):(?P<address>\S+)$")
ENTRY_POINT_GROUP = "envgym.environments"
#: The package whose subpackages are the built-in families (each with a ``SPECS`` list).
FAMILIES_PACKAGE = "envgym.environments"
#: envgym's one id that is no family's: the client of an env served by ``envgym serve``
#: (``gymnasium.make(REMOTE_ID, url=..., env_id=...)``, :mod:`envgym.remote`). In Gymnasium's
#: registry only: it is not an environment of its own, so listings and checkers leave it out.
REMOTE_ID = "envgym/Remote-v0"
#: Likewise: any MCP server's tools as an env (``gymnasium.make(MCP_ID, server=..., tasks=..., verifier=...)``,
#: :mod:`envgym.mcp`); it needs a server, tasks and a verifier, so listings and checkers leave it out.
MCP_ID = "envgym/MCP-v0"


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """One registered environment id.

    Attributes:
        id: ``namespace/Name-vN``; bump N whenever tasks, observations, actions or rewards change.
        entry_point: ``"package.module:Class"`` (imported only when the env is made).
        family: the environment family (``games``, ``household``, ...), used to group listings.
        summary: one line shown by ``envgym list``.
        kwargs: keyword arguments passed to the class; ``make`` kwargs override them.
        kind: ``"gymnasium"`` (single agent), ``"aec"`` or ``"parallel"`` (PettingZoo).
        variant_of: the base id this preset specialises (``None`` for base ids).
    """

    id: str
    entry_point: str
    family: str
    summary: str = ""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    kind: Kind = "gymnasium"
    variant_of: str | None = None

    def __post_init__(self) -> None:
        if not ENV_ID.match(self.id) and _address(self.id) is None:
            raise EnvgymError(f"environment id must look like 'namespace/Name-vN' (or 'openenv:URL'), got {self.id!r}.")
        if ":" not in self.entry_point:
            raise EnvgymError(f"entry_point must be 'module:attribute', got {self.entry_point!r} for {self.id!r}.")
        if self.kind not in ("gymnasium", "aec", "parallel"):
            raise EnvgymError(f"kind must be 'gymnasium', 'aec' or 'parallel', got {self.kind!r} for {self.id!r}.")

    @property
    def name(self) -> str:
        match = ENV_ID.match(self.id)
        return match["name"] if match else self.id  # an address id is its own name

    @property
    def version(self) -> int:
        match = ENV_ID.match(self.id)
        return int(match["version"]) if match else 0

    @property
    def multi_agent(self) -> bool:
        return self.kind != "gymnasium"

    def load(self) -> Any:
        """Import and return the entry point (the environment class)."""
        module_name, _, attribute = self.entry_point.partition(":")
        module = importlib.import_module(module_name)
        return getattr(module, attribute)


_single: dict[str, EnvSpec] = {}
_multi: dict[str, EnvSpec] = {}
_lock = threading.RLock()
_discovered = False
_plugins_discovered = False


def register(spec: EnvSpec) -> None:
    """Add ``spec`` to envgym's registry (and Gymnasium's for single-agent envs). Idempotent."""
    table = _multi if spec.multi_agent else _single
    with _lock:
        existing = table.get(spec.id)
        if existing is not None:
            if existing == spec:
                return
            raise EnvgymError(
                f"environment id {spec.id!r} is already registered with a different spec "
                f"({existing.entry_point}); bump the version to register a changed environment."
            )
        table[spec.id] = spec
        if not spec.multi_agent:
            import gymnasium

            if spec.id not in gymnasium.registry:
                gymnasium.register(id=spec.id, entry_point=spec.entry_point, kwargs=dict(spec.kwargs))


def _family_modules() -> Iterable[tuple[str, str]]:
    # By name: the library reaches environments only by string (the package's __init__ is tiny).
    families = importlib.import_module(FAMILIES_PACKAGE)
    for info in sorted(pkgutil.iter_modules(families.__path__), key=lambda m: m.name):
        if info.ispkg and not info.name.startswith("_"):
            yield info.name, f"{FAMILIES_PACKAGE}.{info.name}"


def _plugin_modules() -> Iterable[tuple[str, str]]:
    # importlib.metadata costs ~40 ms to import and scan, so plugins are looked up only when a
    # listing or an unknown id needs them, never on the `import gymnasium` path.
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        yield ep.name, ep.value


def _register_families(modules: Iterable[tuple[str, str]]) -> None:
    for family, module_name in modules:
        try:
            module = importlib.import_module(module_name)
            for env_spec in module.SPECS:
                register(env_spec)
        except Exception as err:  # noqa: BLE001 - one broken family must not hide the others
            warnings.warn(f"envgym: could not register family {family!r} from {module_name}: {err!r}", stacklevel=3)


def register_envs(*, plugins: bool = False) -> None:
    """Register every built-in family once (later calls return at once).

    With ``plugins=True`` also the families other distributions declare under the
    ``envgym.environments`` entry-point group (a module with a ``SPECS`` list), once.
    """
    global _discovered, _plugins_discovered
    if not _discovered:
        with _lock:
            if not _discovered:
                _register_families(_family_modules())
                import gymnasium

                if REMOTE_ID not in gymnasium.registry:
                    gymnasium.register(id=REMOTE_ID, entry_point="envgym.remote.env:RemoteEnv")
                if MCP_ID not in gymnasium.registry:
                    gymnasium.register(id=MCP_ID, entry_point="envgym.mcp.env:MCPEnv")
                _discovered = True
    if plugins and not _plugins_discovered:
        with _lock:
            if not _plugins_discovered:
                _register_families(_plugin_modules())
                _plugins_discovered = True


def list_envs(*, family: str | None = None, kind: Kind | None = None, variants: bool = True) -> list[EnvSpec]:
    """Every registered spec, sorted by family then id, optionally filtered."""
    register_envs(plugins=True)
    specs = [*_single.values(), *_multi.values()]
    if family is not None:
        specs = [s for s in specs if s.family == family]
    if kind is not None:
        specs = [s for s in specs if s.kind == kind]
    if not variants:
        specs = [s for s in specs if s.variant_of is None]
    return sorted(specs, key=lambda s: (s.family, s.id, s.kind))


def _unknown(env_id: str, *, multi: bool) -> UnknownEnvError:
    register_envs(plugins=True)
    known = list(_multi if multi else _single)
    other = _single if multi else _multi
    if env_id in other:
        hint = "envgym.make / gymnasium.make" if multi else "envgym.make_aec or envgym.make_parallel"
        return UnknownEnvError(f"{env_id!r} is registered as a {other[env_id].kind} environment: build it with {hint}.")
    match = ENV_ID.match(env_id)
    if match:
        same_name = [k for k in known if ENV_ID.match(k) and ENV_ID.match(k)["name"] == match["name"]]  # type: ignore[index]
        if same_name:
            return UnknownEnvError(
                f"{env_id!r} has no such version; registered versions: {', '.join(sorted(same_name))}."
            )
    kind = "multi-agent" if multi else "single-agent"
    return UnknownEnvError(
        f"unknown {kind} environment id {env_id!r}.{suggest(env_id, known)} Run `envgym list` to see every id."
    )


def _address(env_id: str) -> tuple[str, str] | None:
    """``(scheme, address)`` of an address id (:data:`ADDRESS_SCHEMES`), else ``None``."""
    match = ADDRESS_ID.match(env_id) if isinstance(env_id, str) else None
    return (match["scheme"], match["address"]) if match and match["scheme"] in ADDRESS_SCHEMES else None


def spec(env_id: str) -> EnvSpec:
    """The spec of a registered id (single-agent first, then multi-agent), or of an address id
    (``openenv:URL``: made from its address, never registered)."""
    address = _address(env_id)
    if address is not None:
        scheme, url = address
        return EnvSpec(id=env_id, entry_point=ADDRESS_SCHEMES[scheme], family=scheme, kwargs={"url": url})
    register_envs()
    found = _single.get(env_id) or _multi.get(env_id)
    if found is None:
        register_envs(plugins=True)
        found = _single.get(env_id) or _multi.get(env_id)
    if found is None:
        raise _unknown(env_id, multi=False)
    return found


def make(env_id: str, *, reward_wrappers: Sequence[Any] | None = None, **kwargs: Any) -> Any:
    """``gymnasium.make`` with envgym's error messages for unknown ids, and reward wrappers.

    Args:
        env_id: a registered single-agent id (``envgym/Sokoban-v0``), or an address id
            (``openenv:http://HOST:PORT``, :data:`ADDRESS_SCHEMES`).
        reward_wrappers: reward wrapper specs stacked on the environment, first innermost
            (:func:`envgym.rewards.wrap_rewards`: ``[{"step_cost": {"cost": -0.01}}, "outcome"]``).
            Plain data, so a suite entry, a training config or a worker pool passes them through
            ``env_kwargs`` like any other argument; ``None`` or ``[]``: no wrappers.
        kwargs: the environment's own keyword arguments.

    Raises:
        UnknownEnvError: ``env_id`` is not registered (with the closest ids).
        RubricError: a malformed wrapper spec (checked before the environment is made), or one
            the environment cannot carry (a component it lacks, one it already emits).
    """
    # Here, not at the top: this module runs inside `import gymnasium` (envgym._autoregister),
    # and envgym.rewards imports gymnasium, which would call that hook back mid-import.
    from envgym.rewards.wrappers.spec import check_reward_wrappers, wrap_rewards

    if reward_wrappers is not None:
        check_reward_wrappers(reward_wrappers)  # a bad spec fails before the environment is made
    if _address(env_id) is not None:  # no Gymnasium id: built from its spec
        found = spec(env_id)
        env = found.load()(**{**found.kwargs, **kwargs})
    else:
        register_envs()
        if env_id not in _single:
            register_envs(plugins=True)
        if env_id not in _single:
            raise _unknown(env_id, multi=False)
        import gymnasium

        env = gymnasium.make(env_id, **kwargs)
    if not reward_wrappers:
        return env
    try:
        return wrap_rewards(env, reward_wrappers)
    except BaseException:
        env.close()
        raise


def make_aec(env_id: str, **kwargs: Any) -> Any:
    """Build a PettingZoo ``AECEnv`` registered under ``env_id``."""
    register_envs()
    found = _multi.get(env_id)
    if found is None:
        register_envs(plugins=True)
        found = _multi.get(env_id)
    if found is None:
        raise _unknown(env_id, multi=True)
    env = found.load()(**{**found.kwargs, **kwargs})
    if found.kind == "parallel":
        from pettingzoo.utils.conversions import parallel_to_aec

        return parallel_to_aec(env)
    return env


def make_parallel(env_id: str, **kwargs: Any) -> Any:
    """Build a PettingZoo ``ParallelEnv`` registered under ``env_id``.

    Turn-based AEC games cannot be played in parallel; asking for one raises an error that says
    to use :func:`make_aec`.
    """
    register_envs()
    found = _multi.get(env_id)
    if found is None:
        register_envs(plugins=True)
        found = _multi.get(env_id)
    if found is None:
        raise _unknown(env_id, multi=True)
    env = found.load()(**{**found.kwargs, **kwargs})
    if found.kind == "parallel":
        return env
    if not env.metadata.get("is_parallelizable", False):
        env.close()
        raise EnvgymError(
            f"{env_id!r} is a turn-based AEC environment and cannot run in parallel: use envgym.make_aec."
        )
    from pettingzoo.utils.conversions import aec_to_parallel

    return aec_to_parallel(env)
