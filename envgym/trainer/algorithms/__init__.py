"""Training algorithms, chosen by name (``TrainConfig.algo``) from a registry.

Built in: ``grpo``, ``dr_grpo`` (:mod:`.grpo`), ``rloo`` (:mod:`.rloo`), ``ppo`` (:mod:`.ppo`),
``gigpo`` (:mod:`.gigpo`). Each is a small :class:`Algorithm` object: how advantages come from an
update's episodes, whether the policy needs a value head (and the loss a value term), whether
it compares the episodes of a group, which ``reward_norm`` settings it accepts, and its default
loss aggregation. The trainer loop asks the chosen one and never names an algorithm.

Adding an algorithm is one file and a test::

    # my_algo.py
    from envgym.trainer.algorithms import Advantages, Algorithm, Episodes, register_algorithm

    class RawReturn(Algorithm):
        name = "raw_return"
        summary = "every turn gets its episode's return"
        group_relative = False

        def advantages(self, episodes: Episodes) -> Advantages:
            return Advantages([episodes.returns[i].expand(len(t.turns)) for i, t in enumerate(episodes.trajectories)])

    register_algorithm(RawReturn())

then ``envgym train --algo raw_return`` (after importing the module, e.g. from a plugin package)
or ``TrainConfig(algo="raw_return")``. The pure estimators and losses it may combine live in
:mod:`envgym.trainer.advantages` and :mod:`envgym.trainer.losses`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envgym.errors import ConfigError, suggest
from envgym.trainer.algorithms.base import Advantages, Algorithm, Episodes
from envgym.trainer.algorithms.gigpo import GiGPO
from envgym.trainer.algorithms.grpo import GRPO, DrGRPO
from envgym.trainer.algorithms.ppo import PPO
from envgym.trainer.algorithms.rloo import RLOO

if TYPE_CHECKING:
    from envgym.trainer.config import TrainConfig

__all__ = [
    "Advantages",
    "Algorithm",
    "Episodes",
    "algorithm_names",
    "check_config",
    "get_algorithm",
    "register_algorithm",
    "unregister_algorithm",
]

_REGISTRY: dict[str, Algorithm] = {}


def register_algorithm(algorithm: Algorithm, *, replace: bool = False) -> Algorithm:
    """Make ``algorithm`` selectable as ``TrainConfig(algo=algorithm.name)``."""
    if not isinstance(algorithm, Algorithm):
        raise ConfigError(f"register_algorithm expects an Algorithm instance, got {algorithm!r}.")
    name = getattr(algorithm, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{type(algorithm).__name__} must set a non-empty class attribute 'name'.")
    if name in _REGISTRY and not replace:
        raise ConfigError(f"an algorithm named {name!r} is already registered; pass replace=True to replace it.")
    _REGISTRY[name] = algorithm
    return algorithm


def unregister_algorithm(name: str) -> None:
    """Remove an algorithm registered at run time (tests, plugins)."""
    _REGISTRY.pop(name, None)


def algorithm_names() -> tuple[str, ...]:
    """The registered algorithms' names, built-in ones first."""
    return tuple(_REGISTRY)


def get_algorithm(name: str) -> Algorithm:
    """The registered algorithm ``name``; a :class:`ConfigError` naming the known ones otherwise."""
    found = _REGISTRY.get(name) if isinstance(name, str) else None
    if found is None:
        known = algorithm_names()
        raise ConfigError(
            f"algo must be one of {', '.join(map(repr, known))}, got {name!r}.{suggest(str(name), known)}"
        )
    return found


def check_config(config: TrainConfig) -> Algorithm:
    """The algorithm ``config.algo`` names, after checking the settings it depends on: the
    ``reward_norm`` (naming the algorithms that accept it) and the algorithm's own :meth:`~Algorithm.validate`."""
    algorithm = get_algorithm(config.algo)
    if config.reward_norm not in algorithm.reward_norms:
        able = [name for name, other in _REGISTRY.items() if config.reward_norm in other.reward_norms]
        raise ConfigError(
            f"reward_norm={config.reward_norm!r} works with {', '.join(able) or 'no algorithm'}, not "
            f"algo={algorithm.name!r}. Use reward_norm='sum' or another algo."
        )
    algorithm.validate(config)
    return algorithm


for _builtin in (GRPO(), DrGRPO(), RLOO(), PPO(), GiGPO()):
    register_algorithm(_builtin)
