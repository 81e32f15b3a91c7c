"""A misbehaving toy environment for the env-pool tests (registered only by tests/test_pools.py).

Worker processes and Ray actors import this module by name (``pool_toy_envs:CrashEnv``): the
pool sends the parent's ``sys.path``, which holds ``tests/`` under pytest, along with the spec.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

from envgym import EnvSpec, InvalidAction, Task, TextEnv, Transition

CRASH_ID = "pooltoy/Crash-v0"
SPEC = EnvSpec(id=CRASH_ID, entry_point="pool_toy_envs:CrashEnv", family="test", summary="pool test env")


class CrashEnv(TextEnv):
    """Count ticks; some actions make the env (or its process) misbehave on purpose.

    Observation: ``secret S, ticks N`` (``S`` drawn from the seed, so backends can be compared).
    Actions: ``tick``; ``done`` (ends the episode); ``raise`` (raises ValueError); ``exit``
    (``os._exit(3)``); ``sleep X`` (sleeps X seconds, then ticks); ``unpicklable`` (an info that
    cannot be pickled). ``reset(options={"raise": "text"})`` raises RuntimeError.
    Reward components: success_reward (1 on ``done``), invalid_action_reward, step_cost_reward.
    Episode end: ``done`` or ``max_turns``.
    Arguments: none besides the common ones.
    """

    name = "pooltoy_crash"
    default_max_turns = 50

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.secret = 0
        self.ticks = 0
        self._unpicklable = False

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        if options and "raise" in options:
            raise RuntimeError(str(options["raise"]))
        self.secret = rng.randint(1, 10**6)
        self.ticks = 0
        return Task(id=f"crash-{self.secret}", goal="Tick, then say done.")

    def _observe(self) -> str:
        return f"secret {self.secret}, ticks {self.ticks}"

    def _parse(self, text: str) -> str:
        if text == "raise":
            raise ValueError("boom on purpose")
        if text == "exit":
            os._exit(3)
        if text.startswith("sleep "):
            time.sleep(float(text.split()[1]))
            return "tick"
        if text in ("tick", "done", "unpicklable"):
            return text
        raise InvalidAction("expected tick or done.")

    def _apply(self, action: str) -> Transition:
        if action == "done":
            return Transition(self._observe(), {"success_reward": 1.0}, terminated=True, success=True)
        self._unpicklable = action == "unpicklable"
        self.ticks += 1
        return Transition(self._observe())

    def _info(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        info = super()._info(*args, **kwargs)
        info["pid"] = os.getpid()
        if self._unpicklable:
            info["lock"] = threading.Lock()
            self._unpicklable = False
        return info

    def admissible_actions(self) -> list[str]:
        return ["tick", "done"]


def register_toy() -> None:
    from envgym.registration import register

    register(SPEC)


def unregister_toy() -> None:
    import gymnasium

    from envgym import registration

    # The registry has no public "unregister": tests clean up the private tables they filled.
    registration._single.pop(CRASH_ID, None)
    gymnasium.registry.pop(CRASH_ID, None)
