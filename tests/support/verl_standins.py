"""Stand-ins for the three verl dependencies this machine lacks, so verl's real agent-loop code imports.

envgym's setup installs verl with ``--no-deps`` (verl pins transformers<5.11, older than envgym's),
so ``tensordict``, ``hydra-core`` and ``codetiming`` are absent, and ``import verl`` fails on its
first line that needs them. :func:`install` puts an import stand-in in ``sys.modules`` for each
one that is missing (a real one that is installed is left alone) and nothing else. Each stand-in
provides only the names verl's modules read at import time, and every one of them raises when
used, so a test that reaches verl code needing the real package fails loudly instead of passing
on a fake: the agent-loop path envgym's adapter runs (``AgentLoopBase``, its token builder,
``AgentLoopOutput``) uses none of them.

Only for a subprocess of the test suite: never import this in a process that trains.
"""

from __future__ import annotations

import importlib.util
import sys
import types

__all__ = ["MISSING", "install"]

#: The distributions verl imports at load time that envgym does not install, by module name.
MISSING = ("tensordict", "hydra", "codetiming")


class _Absent:
    """A name verl imports from a missing package: using it says which one is missing."""

    _package = "?"

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError(f"{type(self).__name__} needs the real {self._package!r} package, which is not installed.")


def _absent(package: str, name: str) -> type:
    return type(name, (_Absent,), {"_package": package})


def _module(name: str, **attrs: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__path__ = []  # a package, so verl's `from tensordict.tensorclass import ...` finds it
    module.__envgym_standin__ = True
    return module


def install() -> list[str]:
    """Put a stand-in for each missing module of :data:`MISSING` in ``sys.modules``; return their names."""
    placed = []
    if importlib.util.find_spec("tensordict") is None:
        tensorclass = _module(
            "tensordict.tensorclass",
            NonTensorData=_absent("tensordict", "NonTensorData"),
            NonTensorStack=_absent("tensordict", "NonTensorStack"),
        )
        sys.modules["tensordict"] = _module(
            "tensordict",
            __version__="0.0+standin",
            TensorDict=_absent("tensordict", "TensorDict"),
            set_lazy_legacy=_absent("tensordict", "set_lazy_legacy"),
            tensorclass=tensorclass,
        )
        sys.modules["tensordict.tensorclass"] = tensorclass
        placed.append("tensordict")
    if importlib.util.find_spec("hydra") is None:
        utils = _module("hydra.utils", instantiate=_absent("hydra-core", "instantiate"))
        sys.modules["hydra"] = _module("hydra", utils=utils)
        sys.modules["hydra.utils"] = utils
        placed.append("hydra")
    if importlib.util.find_spec("codetiming") is None:
        sys.modules["codetiming"] = _module("codetiming", Timer=_absent("codetiming", "Timer"))
        placed.append("codetiming")
    return placed
