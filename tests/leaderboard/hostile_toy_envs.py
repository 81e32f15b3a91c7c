"""A toy environment for the hostile-server tests (registered only by test_leaderboard_hostile_server.py).

It is the pool tests' ``CrashEnv`` (``tests/support/pool_toy_envs.py``) plus one action, ``eat N``:
keep N MiB of memory, then tick; the way a replay that allocates without bound behaves. The
server's upload processes import it by name: they are given the server's ``sys.path`` and registry.
"""

from __future__ import annotations

from typing import Any

from pool_toy_envs import CrashEnv

from envgym import EnvSpec

HUNGRY_ID = "lbtoy/Hungry-v0"
SPEC = EnvSpec(id=HUNGRY_ID, entry_point="hostile_toy_envs:HungryEnv", family="test", summary="hostile server test env")


class HungryEnv(CrashEnv):
    """``CrashEnv`` with ``eat N`` (keeps N MiB, then ticks) besides ``tick``, ``done`` and ``sleep X``.

    Observation, reward components and episode end: those of ``CrashEnv``.
    """

    name = "lbtoy_hungry"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._eaten: list[bytearray] = []

    def _parse(self, text: str) -> str:
        if text.startswith("eat "):
            block = bytearray(int(float(text.split()[1]) * 2**20))
            block[:: 4096] = b"x" * len(block[:: 4096])  # touch every page: real memory, not a reservation
            self._eaten.append(block)
            return "tick"
        return super()._parse(text)


def register_toy() -> None:
    from envgym.registration import register

    register(SPEC)
