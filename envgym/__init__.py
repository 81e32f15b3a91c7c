"""envgym: Gymnasium and PettingZoo environments for LLM agents, with verifiable rewards.

``import envgym`` is cheap: the public names below load on first use, and nothing heavy (torch,
a browser, docker, ray, a model) is imported until a function needs it.

>>> import gymnasium as gym
>>> env = gym.make("envgym/Sokoban-v0")              # doctest: +SKIP
>>> obs, info = env.reset(seed=7)                      # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envgym import _autoregister
from envgym._imports import lazy_exports

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "envgym.core": (
            "INFO_KEYS",
            "InvalidAction",
            "RewardContext",
            "Task",
            "TerminationReason",
            "TextEnv",
            "Transition",
            "extract_action",
        ),
        "envgym.registration": ("EnvSpec", "list_envs", "make", "make_aec", "make_parallel", "register", "spec"),
        "envgym.testing": ("check_aec_env", "check_env", "check_parallel_env"),
        "envgym.vector": ("split_infos",),
    },
    submodules=(
        "bench",
        "cli",
        "core",
        "errors",
        "leaderboard",
        "models",
        "multiagent",
        "registration",
        "rewards",
        "rollout",
        "rubric",
        "spaces",
        "testing",
        "trainer",
        "vector",
    ),
    own=("__version__",),
)

if TYPE_CHECKING:  # pragma: no cover
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
    from envgym.vector import split_infos  # noqa: F401

_autoregister.install()
