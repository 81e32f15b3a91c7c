"""Benchmark suites: versioned YAML files, validated in full before any episode runs.

A suite lives in ``benchmarks/<name>-v<version>.yaml``; its id is ``<name>-v<version>``
(``core-v1``) and the file name must agree with the ``name`` and ``version`` inside. A suite
version is frozen once published: any change to what it runs makes a new version (a new file).

.. code-block:: yaml

    name: core                 # lowercase letters, digits, '-' and '_'; no trailing -vN
    version: 1                 # an integer >= 1
    description: one paragraph
    defaults:                  # applied to every entry that does not set the field
      episodes: 5              # tasks (seeds) per entry
      seed: 1000               # first seed when an entry gives no seeds
      split: test              # task split passed to the env as split=...
      max_turns: 20            # harness turn limit (null: the environment's own)
      trials: 1                # episodes per seed (pass^k needs trials > 1; --trials overrides)
    metrics: [success_rate, mean_reward, pass_hat_k, mean_turns, tokens, wall_time, format_ok_rate]
    prompt:                    # optional: PromptConfig fields for chat agents, the same for every entry
      history: last_k          # (envgym.rollout.PromptConfig; max_turns is set above, not here)
      last_k: 2
      max_new_tokens: 48       # per-reply token cap every agent is held to
    entries:
      - name: sokoban          # unique; also the entry's folder name in a run
        env: envgym/Sokoban-v0 # a registered single-agent id (it carries the env version)
        kwargs: {difficulty: easy}
        split: test
        seeds: {start: 1000, count: 5}   # or an explicit list: [3, 8, 13]
        episodes: 5            # optional with seeds; must agree with their count
        max_turns: 30
        reward_wrappers:       # optional: reward wrappers stacked on the env (envgym.rewards.wrap_rewards)
          - step_cost: {cost: -0.01, name: time_penalty_reward}

:func:`load_suite` checks everything a run needs: field types, unknown fields (with "did you
mean"), duplicate entry names, environment ids (with "did you mean"), the prompt block (field
names with "did you mean", values as :class:`~envgym.rollout.prompting.PromptConfig` checks them),
the reward wrapper specs (names and option names; their values on the environment) and the
keyword arguments, by building one environment per entry. Errors name the file, the entry and the
field.

An entry's ``reward_wrappers`` reach the environment through its ``env_kwargs`` (the key
``reward_wrappers``, which :func:`envgym.registration.make` applies), so the harness, its worker
pools and the leaderboard's replay build the same wrapped environment. They change the rewards,
so they are in the resolved form and the sha256; an entry without them resolves as before.

The ``prompt`` block is part of the suite: it is in the resolved form and so in the suite's
sha256 (a changed block is another suite to the leaderboard). It is kept as written (only the
fields it names); the other fields take :class:`PromptConfig`'s defaults, which belong to the
envgym version a result names.

Where suites are found (:func:`suites_dir`): ``$ENVGYM_BENCHMARKS`` when set; else the
``benchmarks`` folder installed inside the package (``envgym/benchmarks``) when it exists; else
the ``benchmarks/`` folder of the source checkout that holds this package (editable installs and
the repository itself). A suite argument that is a path to a ``.yaml`` file is used as is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envgym.errors import ConfigError, NotAvailableError, UnknownEnvError, suggest
from envgym.registration import make, make_parallel, spec
from envgym.rewards.wrappers.spec import check_reward_wrappers, wrap_rewards
from envgym.rollout.prompting import PromptConfig
from envgym.rubric import RubricError

__all__ = [
    "METRICS",
    "Suite",
    "SuiteEntry",
    "find_suite",
    "list_suites",
    "load_suite",
    "parse_suite",
    "suites_dir",
]

#: Metrics a suite may list (all are computed; the listed ones are shown in tables and reports).
METRICS = (
    "success_rate",
    "mean_reward",
    "pass_hat_k",
    "mean_turns",
    "tokens",
    "wall_time",
    "format_ok_rate",
)
#: Fields of ``defaults`` and their fallbacks when a suite leaves them out.
DEFAULTS: dict[str, Any] = {"episodes": 5, "seed": 0, "split": "test", "max_turns": None, "trials": 1}
TOP_FIELDS = ("name", "version", "description", "defaults", "metrics", "prompt", "entries")
#: PromptConfig fields a suite's prompt block may not set, and where the setting belongs instead.
PROMPT_FORBIDDEN = {"max_turns": "the suite's defaults.max_turns or an entry's max_turns"}
ENTRY_FIELDS = ("name", "env", "kwargs", "split", "seeds", "episodes", "max_turns", "reward_wrappers")
SUITE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
ENTRY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SUITE_ID = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]*?)-v(?P<version>\d+)$")
ENV_DIR_VAR = "ENVGYM_BENCHMARKS"


# -- where suites live -------------------------------------------------------------------------------
def suites_dir() -> Path:
    """The folder that holds the bundled suites (see the module docstring for the lookup order)."""
    override = os.environ.get(ENV_DIR_VAR)
    if override:
        return Path(override).expanduser()
    package = Path(__file__).resolve().parents[1]  # .../envgym
    inside = package / "benchmarks"
    if inside.is_dir():
        return inside
    return package.parent / "benchmarks"


def list_suites(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """Suite files (``*-v<N>.yaml``) in ``directory`` (default :func:`suites_dir`), sorted by id."""
    folder = Path(directory) if directory is not None else suites_dir()
    if not folder.is_dir():
        return []
    files = [p for p in folder.glob("*.yaml") if SUITE_ID.match(p.stem)]
    return sorted(files, key=lambda p: p.stem)


def find_suite(name_or_path: str | os.PathLike[str]) -> Path:
    """The file of a suite given by id (``core-v1``) or by path (``my/suite-v2.yaml``).

    An existing file wins; a bare name (``core-v1`` or ``core-v1.yaml``) is looked up in
    :func:`suites_dir`.

    Raises:
        ConfigError: no such file, with the bundled suite ids and the closest one.
    """
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    if os.sep in text or "/" in text:
        raise ConfigError(f"suite file {text!r} does not exist; give a suite id such as 'core-v1' or a .yaml path.")
    if path.suffix in (".yaml", ".yml"):  # a bare file name: the bundled suite of that name, if any
        text = path.stem
    candidates = list_suites()
    by_id = {p.stem: p for p in candidates}
    if text in by_id:
        return by_id[text]
    where = suites_dir()
    known = ", ".join(by_id) or "none"
    raise ConfigError(
        f"unknown suite {text!r}.{suggest(text, by_id)} Suites in {where}: {known}. "
        f"Give a suite id, a path to a .yaml file, or set ${ENV_DIR_VAR} to another folder."
    )


# -- the suite objects ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SuiteEntry:
    """One environment configuration of a suite, with the suite's defaults applied."""

    name: str
    """Unique within the suite; the entry's folder name in a run."""
    env: str
    """Registered single-agent or PettingZoo Parallel environment id (``envgym/Sokoban-v0``): carries the
    env version. A Parallel entry records one episode per agent (see :mod:`envgym.rollout.multiagent`)."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``envgym.make`` (the split is passed apart)."""
    split: str = "test"
    """Task split, passed to the environment as ``split=``."""
    seeds: tuple[int, ...] = ()
    """The environment seeds (tasks) of the entry, in order."""
    max_turns: int | None = None
    """Harness turn limit per episode (``None``: the environment's own)."""
    reward_wrappers: tuple[Any, ...] = ()
    """Reward wrapper specs stacked on the environment, first innermost (see
    :func:`envgym.rewards.wrap_rewards`); empty: the environment's own rewards."""

    @property
    def episodes(self) -> int:
        """Tasks in the entry (one seed each); a run plays ``episodes * trials`` episodes."""
        return len(self.seeds)

    @property
    def contiguous(self) -> bool:
        """Whether the seeds are ``start, start + 1, ...`` (what the harness plays natively)."""
        return all(b == a + 1 for a, b in zip(self.seeds, self.seeds[1:], strict=False))

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """What ``envgym.make`` receives: the kwargs plus ``split``, and ``reward_wrappers`` when
        the entry has any (:func:`envgym.registration.make` stacks them)."""
        kwargs = {**dict(self.kwargs), "split": self.split}
        if self.reward_wrappers:
            kwargs["reward_wrappers"] = _plain(list(self.reward_wrappers))
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        """The resolved form (what a run's ``suite.yaml`` holds). ``reward_wrappers`` is present
        only when the entry has some (so entries without them keep their suite's hash)."""
        seeds: Any = (
            {"start": self.seeds[0], "count": len(self.seeds)} if self.contiguous and self.seeds else list(self.seeds)
        )
        data: dict[str, Any] = {
            "name": self.name,
            "env": self.env,
            "kwargs": _plain(dict(self.kwargs)),
            "split": self.split,
            "seeds": seeds,
            "episodes": self.episodes,
            "max_turns": self.max_turns,
        }
        if self.reward_wrappers:
            data["reward_wrappers"] = _plain(list(self.reward_wrappers))
        return data


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A loaded, validated suite."""

    name: str
    """Suite name without the version (``core``)."""
    version: int
    """Suite version; the id is ``<name>-v<version>``."""
    description: str = ""
    """What the suite measures."""
    defaults: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULTS))
    """The defaults as resolved (every field of :data:`DEFAULTS`)."""
    metrics: tuple[str, ...] = METRICS
    """Metrics shown in tables and reports (every metric is computed and stored)."""
    entries: tuple[SuiteEntry, ...] = ()
    """The entries, in order."""
    prompt: Mapping[str, Any] = field(default_factory=dict)
    """The suite's prompt block (:class:`~envgym.rollout.prompting.PromptConfig` fields), as
    written; empty when the suite has none. Applied to every entry's run."""
    path: Path | None = None
    """The file it was loaded from (not part of its identity)."""

    @property
    def id(self) -> str:
        return f"{self.name}-v{self.version}"

    @property
    def trials(self) -> int:
        """Default trials (episodes per seed) of the suite."""
        return int(self.defaults.get("trials", 1))

    def entry(self, name: str) -> SuiteEntry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        names = [e.name for e in self.entries]
        raise ConfigError(f"suite {self.id} has no entry {name!r}.{suggest(name, names)} Entries: {', '.join(names)}.")

    @property
    def prompt_config(self) -> Any:
        """The :class:`~envgym.rollout.prompting.PromptConfig` every entry runs with."""
        return PromptConfig.from_dict(dict(self.prompt))

    def to_dict(self) -> dict[str, Any]:
        """The canonical resolved form: defaults applied to every entry. ``prompt`` is present
        only when the suite has a prompt block (so suites without one keep their hash)."""
        data: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "defaults": _plain(dict(self.defaults)),
            "metrics": list(self.metrics),
        }
        if self.prompt:
            data["prompt"] = _plain(dict(self.prompt))
        data["entries"] = [e.to_dict() for e in self.entries]
        return data

    @property
    def sha256(self) -> str:
        """sha256 of the canonical JSON of :meth:`to_dict` without ``description`` (keys sorted, no
        spaces): equal for two files that run the same episodes and report the same metrics."""
        data = self.to_dict()
        data.pop("description")
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_yaml(self) -> str:
        """The resolved suite as YAML (``suite.yaml`` in a run folder)."""
        header = f"# {self.id}, resolved (defaults applied); sha256 {self.sha256}\n"
        return header + yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=100)

    def summary(self) -> dict[str, Any]:
        """One line of ``envgym bench list``."""
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "entries": len(self.entries),
            "episodes": sum(e.episodes for e in self.entries),
            "trials": self.trials,
            "prompt": _plain(dict(self.prompt)),
            "envs": sorted({e.env for e in self.entries}),
            "sha256": self.sha256,
            "path": str(self.path) if self.path is not None else None,
        }


def _plain(value: Any) -> Any:
    """YAML/JSON-ready copy (tuples to lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# -- loading -------------------------------------------------------------------------------------------
def load_suite(name_or_path: str | os.PathLike[str], *, check_envs: bool = True) -> Suite:
    """Load and validate a suite by id (``core-v1``) or path.

    Args:
        name_or_path: a suite id found in :func:`suites_dir`, or a path to a YAML file.
        check_envs: build one environment per entry to check its keyword arguments (the
            default; ``False`` only checks the ids).

    Raises:
        ConfigError: anything wrong, with the file, entry and field in the message.
        NotAvailableError: an entry's environment needs an optional extra that is not installed.
    """
    path = find_suite(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read the suite file ({err}).") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(err, 'problem', None) or err}.") from err
    suite = parse_suite(data, source=str(path), check_envs=False)
    stem_match = SUITE_ID.match(path.stem)
    if path.stem != suite.id:
        found = f"{stem_match['name']!r} version {int(stem_match['version'])}" if stem_match else "no id"
        raise ConfigError(
            f"{path}: the file name says {found} but the file holds name {suite.name!r} version {suite.version}; "
            f"name the file {suite.id}.yaml (a suite file is <name>-v<version>.yaml), or fix name/version inside."
        )
    if check_envs:
        for i, entry in enumerate(suite.entries):
            _check_env(entry, i, str(path))
    return Suite(
        name=suite.name,
        version=suite.version,
        description=suite.description,
        defaults=suite.defaults,
        metrics=suite.metrics,
        entries=suite.entries,
        prompt=suite.prompt,
        path=path,
    )


def _int(value: Any, where: str, *, minimum: int | None = None, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        none = " or null" if allow_none else ""
        raise ConfigError(f"{where}: expected an integer{bound}{none}, got {value!r}.")
    return value


def _unknown_keys(data: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    for key in data:
        if key not in known:
            raise ConfigError(
                f"{where}: unknown field {key!r}.{suggest(str(key), known)} Known fields: {', '.join(known)}."
            )


def parse_suite(data: Any, *, source: str = "<suite>", check_envs: bool = True, check_ids: bool = True) -> Suite:
    """Validate a suite given as parsed YAML (a mapping) and resolve its defaults.

    ``source`` names the file in error messages. ``check_ids=False`` skips the registry look-up
    (reading back an old run whose environments this installation may not have). See
    :func:`load_suite`.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a suite file is a YAML mapping with {', '.join(TOP_FIELDS)}; got {data!r:.80}.")
    _unknown_keys(data, TOP_FIELDS, source)
    for key in ("name", "version", "entries"):
        if key not in data:
            raise ConfigError(f"{source}: missing required field {key!r}.")
    name = data["name"]
    if not isinstance(name, str) or not SUITE_NAME.match(name) or SUITE_ID.match(name):
        raise ConfigError(
            f"{source}: field 'name': expected lowercase letters, digits, '-' or '_' without a -vN suffix "
            f"(the version is its own field), got {name!r}."
        )
    version = _int(data["version"], f"{source}: field 'version'", minimum=1)
    assert version is not None
    description = data.get("description", "") or ""
    if not isinstance(description, str):
        raise ConfigError(f"{source}: field 'description': expected text, got {description!r:.80}.")

    raw_defaults = data.get("defaults") or {}
    if not isinstance(raw_defaults, Mapping):
        raise ConfigError(f"{source}: field 'defaults': expected a mapping, got {raw_defaults!r:.80}.")
    _unknown_keys(raw_defaults, tuple(DEFAULTS), f"{source}: defaults")
    defaults = {**DEFAULTS, **raw_defaults}
    _int(defaults["episodes"], f"{source}: defaults.episodes", minimum=1)
    _int(defaults["seed"], f"{source}: defaults.seed", minimum=0)
    _int(defaults["max_turns"], f"{source}: defaults.max_turns", minimum=1, allow_none=True)
    _int(defaults["trials"], f"{source}: defaults.trials", minimum=1)
    if not isinstance(defaults["split"], str) or not defaults["split"]:
        raise ConfigError(f"{source}: defaults.split: expected a split name such as 'test', got {defaults['split']!r}.")

    metrics = data.get("metrics", list(METRICS))
    if not isinstance(metrics, list) or not metrics:
        raise ConfigError(f"{source}: field 'metrics': expected a non-empty list of {', '.join(METRICS)}.")
    for metric in metrics:
        if metric not in METRICS:
            raise ConfigError(
                f"{source}: field 'metrics': unknown metric {metric!r}.{suggest(str(metric), METRICS)} "
                f"Known: {', '.join(METRICS)}."
            )
    if len(set(metrics)) != len(metrics):
        raise ConfigError(f"{source}: field 'metrics' lists a metric twice: {metrics!r}.")

    prompt = _parse_prompt(data.get("prompt"), source)

    raw_entries = data["entries"]
    if not isinstance(raw_entries, list) or not raw_entries:
        raise ConfigError(f"{source}: field 'entries': expected a non-empty list of entries, got {raw_entries!r:.80}.")
    entries: list[SuiteEntry] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_entries):
        entry = _parse_entry(raw, i, defaults, source, check_ids=check_ids)
        if entry.name in seen:
            raise ConfigError(
                f"{source}: entries[{i}] field 'name': {entry.name!r} is already the name of entries[{seen[entry.name]}]; "
                "entry names must be unique."
            )
        seen[entry.name] = i
        entries.append(entry)
    if check_envs:
        for i, entry in enumerate(entries):
            _check_env(entry, i, source)
    return Suite(
        name=name,
        version=version,
        description=description.strip(),
        defaults=defaults,
        metrics=tuple(metrics),
        entries=tuple(entries),
        prompt=prompt,
    )


def _parse_prompt(raw: Any, source: str) -> dict[str, Any]:
    """The suite's prompt block, validated by building a PromptConfig from it; ``{}`` when absent."""
    if raw is None:
        return {}
    where = f"{source}: field 'prompt'"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of prompt settings (history: last_k, ...), got {raw!r:.80}.")
    for key, instead in PROMPT_FORBIDDEN.items():
        if key in raw:
            raise ConfigError(f"{where}: {key!r} cannot be set here; use {instead}.")
    try:
        config = PromptConfig.from_dict(raw)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from err
    resolved = config.to_dict()
    return {str(key): resolved[key] for key in raw}  # as written, normalised (action_tags as a list)


def _parse_entry(raw: Any, i: int, defaults: Mapping[str, Any], source: str, *, check_ids: bool = True) -> SuiteEntry:
    label = f"{source}: entries[{i}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{label}: expected a mapping with {', '.join(ENTRY_FIELDS)}, got {raw!r:.80}.")
    name = raw.get("name")
    if name is not None:
        label = f"{source}: entries[{i}] ({name!r})"
    _unknown_keys(raw, ENTRY_FIELDS, label)
    if not isinstance(name, str) or not ENTRY_NAME.match(name):
        raise ConfigError(
            f"{label} field 'name': expected a name of letters, digits, '.', '-' or '_' (it becomes a folder name), "
            f"got {name!r}."
        )
    env_id = raw.get("env")
    if not isinstance(env_id, str) or not env_id:
        raise ConfigError(f"{label} field 'env': expected a registered id such as 'envgym/Sokoban-v0', got {env_id!r}.")
    if check_ids:
        try:
            env_spec = spec(env_id)
        except UnknownEnvError as err:
            raise ConfigError(f"{label} field 'env': {err}") from err
        if env_spec.kind not in ("gymnasium", "parallel"):
            raise ConfigError(
                f"{label} field 'env': {env_id!r} is a turn-based ({env_spec.kind}) multi-agent environment; "
                "suites run single-agent ids and PettingZoo Parallel ids."
            )
        if env_spec.kind == "parallel" and raw.get("reward_wrappers"):
            raise ConfigError(
                f"{label} field 'reward_wrappers': {env_id!r} is a PettingZoo Parallel environment; reward "
                "wrappers apply to single-agent envs only (give its reward settings in kwargs)."
            )
    kwargs = raw.get("kwargs") or {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise ConfigError(f"{label} field 'kwargs': expected a mapping of keyword arguments, got {kwargs!r:.80}.")
    if "split" in kwargs:
        raise ConfigError(f"{label} field 'kwargs': give the split as the entry's 'split' field, not in kwargs.")
    if "reward_wrappers" in kwargs:
        raise ConfigError(
            f"{label} field 'kwargs': give reward wrappers as the entry's 'reward_wrappers' field, not in kwargs."
        )
    reward_wrappers = raw.get("reward_wrappers")
    if reward_wrappers is None:
        reward_wrappers = []
    try:
        check_reward_wrappers(reward_wrappers, where="reward_wrappers")
    except RubricError as err:
        raise ConfigError(f"{label} field {err}") from err
    split = raw.get("split", defaults["split"])
    if not isinstance(split, str) or not split:
        raise ConfigError(f"{label} field 'split': expected a split name such as 'test', got {split!r}.")
    max_turns = _int(
        raw.get("max_turns", defaults["max_turns"]), f"{label} field 'max_turns'", minimum=1, allow_none=True
    )
    episodes = raw.get("episodes")
    if episodes is not None:
        _int(episodes, f"{label} field 'episodes'", minimum=1)
    seeds_raw = raw.get("seeds")
    if seeds_raw is None:
        count = episodes if episodes is not None else defaults["episodes"]
        seeds = tuple(range(defaults["seed"], defaults["seed"] + count))
    elif isinstance(seeds_raw, Mapping):
        _unknown_keys(seeds_raw, ("start", "count"), f"{label} field 'seeds'")
        start = _int(seeds_raw.get("start", defaults["seed"]), f"{label} field 'seeds.start'", minimum=0)
        count = seeds_raw.get("count", episodes if episodes is not None else defaults["episodes"])
        _int(count, f"{label} field 'seeds.count'", minimum=1)
        assert start is not None
        seeds = tuple(range(start, start + count))
    elif isinstance(seeds_raw, list) and seeds_raw:
        for seed in seeds_raw:
            _int(seed, f"{label} field 'seeds'", minimum=0)
        if len(set(seeds_raw)) != len(seeds_raw):
            raise ConfigError(f"{label} field 'seeds': a seed appears twice in {seeds_raw!r}; each task plays once.")
        seeds = tuple(seeds_raw)
    else:
        raise ConfigError(
            f"{label} field 'seeds': expected {{start: S, count: N}} or a non-empty list of seeds, got {seeds_raw!r:.80}."
        )
    if episodes is not None and episodes != len(seeds):
        raise ConfigError(
            f"{label} field 'episodes': {episodes} disagrees with the {len(seeds)} seed(s) given; "
            "drop 'episodes' or make it match the seeds."
        )
    return SuiteEntry(
        name=name,
        env=env_id,
        kwargs=dict(kwargs),
        split=split,
        seeds=seeds,
        max_turns=max_turns,
        reward_wrappers=tuple(_plain(list(reward_wrappers))),
    )


def _check_env(entry: SuiteEntry, i: int, source: str) -> None:
    """Build the entry's environment once: bad kwargs or a bad split fail here, not mid-run. With
    reward wrappers, stack them on it and reset it with the entry's first seed (a wrapper that
    needs an ``info`` key the environment lacks fails at reset)."""
    label = f"{source}: entries[{i}] ({entry.name!r})"
    kwargs = {key: value for key, value in entry.env_kwargs.items() if key != "reward_wrappers"}
    maker = make_parallel if spec(entry.env).kind == "parallel" else make
    try:
        env = maker(entry.env, **kwargs)
    except NotAvailableError:
        raise
    except Exception as err:
        # gymnasium appends where the error came from; the environment's own message is the useful part
        message = str(err).split(" was raised from the environment creator", 1)[0]
        field_name = "split" if message.startswith("split must be") else "kwargs"
        raise ConfigError(
            f"{label} field {field_name!r}: {entry.env} rejects {kwargs!r}: {type(err).__name__}: {message}"
        ) from err
    if entry.reward_wrappers:
        try:
            env = wrap_rewards(env, list(entry.reward_wrappers))
            env.reset(seed=entry.seeds[0])
        except RubricError as err:
            env.close()
            raise ConfigError(f"{label} field {err}") from err
        except Exception:
            env.close()
            raise
    env.close()
