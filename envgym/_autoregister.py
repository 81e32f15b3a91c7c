"""Register envgym's environments in Gymnasium's registry as soon as Gymnasium is imported.

Gymnasium 1.x has no plugin entry point, so ``gymnasium.make("envgym/Sokoban-v0")`` in a fresh
interpreter would not know envgym. The installed ``envgym.pth`` file imports this module at
interpreter start-up; it costs microseconds: it only puts a one-shot finder on ``sys.meta_path``
that, when ``gymnasium`` is first imported, runs :func:`envgym.registration.register_envs` right
after Gymnasium's own module has finished executing. If Gymnasium is already imported the
registration happens at once. A failure never breaks ``import gymnasium``: it becomes a warning.
"""

from __future__ import annotations

import sys
import warnings

_TARGET = "gymnasium"


def _register_now() -> None:
    try:
        from envgym.registration import register_envs

        register_envs()
    except Exception as err:  # noqa: BLE001 - never break the user's import of gymnasium
        warnings.warn(f"envgym could not register its environments with Gymnasium: {err!r}", stacklevel=2)


class _GymnasiumFinder:
    """A ``sys.meta_path`` finder that wraps the loader of ``gymnasium`` so registration runs
    after the module executes (a plain class: subclassing importlib.abc costs import time)."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> object:
        if fullname != _TARGET:
            return None
        uninstall()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: object) -> None:
            original(module)
            _register_now()

        try:
            loader.exec_module = exec_module  # type: ignore[method-assign]
        except AttributeError:  # a loader with __slots__: fall back to registering later
            return spec
        return spec


_finder = _GymnasiumFinder()


def install() -> None:
    """Make sure envgym's environments are (or will be) in Gymnasium's registry."""
    if _TARGET in sys.modules:
        _register_now()
    elif _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    while _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
