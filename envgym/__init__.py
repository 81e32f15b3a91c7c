"""envgym: Gymnasium and PettingZoo environments for LLM agents, with verifiable rewards.

``import envgym`` is cheap: the public names below load on first use, and nothing heavy (torch,
a browser, docker, ray, a model) is imported until a function needs it.

>>> import gymnasium as gym
>>> env = gym.make("envgym/Sokoban-v0")              # doctest: +SKIP
>>> obs, info = env.reset(seed=7)                      # doctest: +SKIP
"""

from __future__ import annotations

import importlib

from envgym import _autoregister

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    # core
    "TextEnv": "envgym.core",
    "Task": "envgym.core",
    "Transition": "envgym.core",
    "InvalidAction": "envgym.core",
    "TerminationReason": "envgym.core",
    "RewardContext": "envgym.core",
    "extract_action": "envgym.core",
    "INFO_KEYS": "envgym.core",
    # registry
    "EnvSpec": "envgym.registration",
    "make": "envgym.registration",
    "make_aec": "envgym.registration",
    "make_parallel": "envgym.registration",
    "spec": "envgym.registration",
    "list_envs": "envgym.registration",
    "register": "envgym.registration",
    # checkers
    "check_env": "envgym.testing",
    "check_aec_env": "envgym.testing",
    "check_parallel_env": "envgym.testing",
}
_SUBMODULES = frozenset(
    {
        "core",
        "errors",
        "spaces",
        "registration",
        "testing",
        "rewards",
        "rollout",
        "multiagent",
        "models",
        "bench",
        "trainer",
        "leaderboard",
        "cli",
    }
)

__all__ = sorted([*_LAZY, "__version__"])

if False:  # typing.TYPE_CHECKING without importing typing  # pragma: no cover
    from envgym.core import (  # noqa: F401
        INFO_KEYS,
        InvalidAction,
        RewardContext,
        Task,
        TerminationReason,
        TextEnv,
        Transition,
        extract_action,
    )
    from envgym.registration import EnvSpec, list_envs, make, make_aec, make_parallel, register, spec  # noqa: F401
    from envgym.testing import check_aec_env, check_env, check_parallel_env  # noqa: F401


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"envgym.{name}")
    raise AttributeError(f"module 'envgym' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_SUBMODULES})


_autoregister.install()
