"""Environments that misbehave on purpose, for the runner's reliability tests.

They live in an importable module (not a test file) because the process and Ray backends make
them again inside worker processes.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from toy_envs import GuessEnv

from envgym.registration import EnvSpec, register


class TrapEnv(GuessEnv):
    """GuessEnv with traps.

    * the action ``boom`` raises ``RuntimeError`` inside ``step`` (an environment bug);
    * with ``kill_marker`` set, the first episode of seed ``kill_seed`` to reach turn
      ``kill_turn`` kills its own process with SIGKILL (a worker dying mid-episode) and leaves
      the marker file behind, so the retry plays through;
    * ``delay`` seconds of sleep in every step (timeouts).
    """

    name = "trap"

    def __init__(
        self,
        *,
        kill_marker: str | None = None,
        kill_seed: int = 3,
        kill_turn: int = 2,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kill_marker = kill_marker
        self.kill_seed = kill_seed
        self.kill_turn = kill_turn
        self.delay = delay
        self._seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._seed = seed
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.delay:
            time.sleep(self.delay)
        if action == "boom":
            raise RuntimeError("the environment blew up")
        if self.kill_marker and self._seed == self.kill_seed and self.turn + 1 >= self.kill_turn:
            marker = Path(self.kill_marker)
            if not marker.exists():
                marker.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


SPECS = [EnvSpec(id="envgymtest/Trap-v0", entry_point="runner_toy_envs:TrapEnv", family="test", kwargs={"high": 6})]
for _spec in SPECS:
    register(_spec)
