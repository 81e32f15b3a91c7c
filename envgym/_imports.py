"""The two kinds of deferred import envgym allows, each in one place.

* :func:`lazy_exports`: a package's public names load on first use (``import envgym`` stays cheap).
  A package ``__init__`` declares ``{submodule: (names...)}`` once and gets ``__getattr__``,
  ``__dir__`` and ``__all__`` from it; nothing else in the package is deferred.
* :func:`optional`: the heavy optional dependencies (:data:`HEAVY`: torch, transformers, ray,
  fastapi, sqlalchemy, playwright, docker, ...) are imported inside the function that needs them,
  through this helper, so a missing one raises :class:`~envgym.errors.MissingDependencyError`
  with the exact install line. Every other import sits at the top of its module, where
  ``tests/test_layering.py`` sees it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

from envgym.errors import MissingDependencyError

__all__ = ["HEAVY", "lazy_exports", "optional"]

#: Top-level distributions that stay out of module import time (each costs 0.2-5 s or pulls a
#: service). The layering test allows imports of these (and only these) inside functions.
HEAVY: Mapping[str, str] = {
    # module: the envgym extra that installs it
    "torch": "llm",
    "transformers": "llm",
    "peft": "train",
    "accelerate": "llm",
    "safetensors": "llm",
    "gguf": "llm",
    "tensorboard": "train",
    "mlflow": "tracking",
    "matplotlib": "report",
    "ray": "ray",
    "fastapi": "leaderboard",
    "uvicorn": "leaderboard",
    "starlette": "leaderboard",
    "sqlalchemy": "leaderboard",
    "httpx": "openai",
    "playwright": "gui",
    "PIL": "gui",
    "docker": "swe",
    "pandas": "data",
    "pyarrow": "data",
    "textworld": "textworld",
    "trl": "integrations",  # envgym.integrations.trl
    "datasets": "integrations",  # TRL's datasets (a dependency of trl)
    "verl": "integrations",  # envgym.integrations.verl builds its agent loop on first use (torch, ray)
    "openenv": "integrations",  # openenv-core imports gradio at load (5-7 s): envgym.integrations.openenv
    "mcp": "mcp",  # the MCP SDK (~2 s: pydantic models, starlette, httpx): envgym.mcp
}


def optional(module: str, *, purpose: str, extra: str | None = None) -> ModuleType:
    """Import ``module`` (a heavy optional dependency) or raise :class:`MissingDependencyError`
    naming ``pip install 'envgym[EXTRA]'``; ``extra`` defaults to the one in :data:`HEAVY`."""
    top = module.split(".", 1)[0]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingDependencyError(top, extra or HEAVY.get(top, "all"), purpose) from err


def lazy_exports(
    package: str,
    exports: Mapping[str, Iterable[str]],
    *,
    aliases: Mapping[str, str] | None = None,
    submodules: Iterable[str] = (),
    own: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for a package whose names load on first use.

    ``exports`` maps a submodule (relative, ``"runner"``, or absolute, ``"envgym.core"``) to the
    public names it defines; ``aliases`` maps an old public name to its current one;
    ``submodules`` are the subpackages reachable as attributes (``envgym.bench``) before anyone
    imported them; ``own`` are public names the package defines itself (listed in ``__all__``).
    """
    reachable = frozenset(submodules)
    where: dict[str, str] = {}
    for submodule, names in exports.items():
        target = submodule if submodule.startswith("envgym") else f"{package}.{submodule}"
        for name in names:
            if name in where:
                raise ValueError(f"{package}: {name!r} exported twice ({where[name]} and {target})")
            where[name] = target
    renamed = dict(aliases or {})
    public = sorted({*where, *renamed, *own})

    def __getattr__(name: str) -> Any:
        current = renamed.get(name, name)
        target = where.get(current)
        if target is None:
            if name in reachable:
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(target), current)
        module = importlib.import_module(package)
        setattr(module, name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        module = importlib.import_module(package)
        return sorted({*vars(module), *public, *reachable})

    return __getattr__, __dir__, public
