"""envgym.remote: environments served by ``envgym serve``, used as local ones.

::

    import envgym.remote

    with envgym.remote.make("ws://127.0.0.1:8000", "envgym/Wordle-v0") as env:   # a gymnasium.Env
        obs, info = env.reset(seed=7)
        obs, reward, terminated, truncated, info = env.step("crane")

    env = gymnasium.make("envgym/Remote-v0", url="ws://127.0.0.1:8000", env_id="envgym/Wordle-v0")

The contract, in one screen:

* **What you get.** :func:`make` returns a :class:`RemoteEnv` (a ``gymnasium.Env``) for a
  single-agent id and a :class:`RemoteParallelEnv` (a PettingZoo ``ParallelEnv``) for a Parallel
  id; the server's ``GET /<id>/spec`` says which and carries the spaces, agents, metadata and
  reward components. Observations, infos (reward components, task, ``admissible_actions``, seed)
  and rewards arrive as the served env produced them (:mod:`envgym.serve.codec`), so the same
  seed plays the same episode as in-process.
* **One session per env.** Each client holds one WebSocket session (docs/serving.md); the env's
  keyword arguments travel with its first reset, so they must be plain JSON data. ``close()``
  ends the session and the server closes its env at once; it is idempotent, and the env is a
  context manager. A client does not pickle (it holds a connection): send its arguments instead.
* **Bad actions.** A malformed text action is an invalid step with the env's feedback, as
  in-process (a value JSON cannot carry travels as its ``repr``); never an exception.
* **Errors** (:mod:`envgym.remote.errors`) carry ``code`` and ``retryable``. A server that cannot
  be reached, goes away mid-episode or does not answer within ``message_timeout_s`` raises
  :class:`ServerLostError` (``retryable=True``, also a ``ConnectionError``); the server's own
  infrastructure errors (``ENV_CRASHED``, ``STEP_TIMEOUT``, ``CAPACITY_REACHED``,
  ``SERVER_STOPPING``) raise :class:`RemoteError` with ``retryable=True``. The harness records
  them as ``env_error`` failures and retries the episode, never scoring them
  (``--backend remote``: :mod:`envgym.rollout.pools.served`). An id the server does not serve
  raises :class:`UnknownRemoteEnvError` (a ``KeyError``, with "did you mean"); refused kwargs
  :class:`RemoteKwargsError`; a step before reset :class:`RemoteResetNeededError`. After a lost
  session the next ``reset`` opens a new one.
"""

from __future__ import annotations

from envgym.remote.env import REMOTE_ID, RemoteEnv, RemoteParallelEnv, make, served_spec
from envgym.remote.errors import (
    RemoteError,
    RemoteKwargsError,
    RemoteResetNeededError,
    ServerLostError,
    UnknownRemoteEnvError,
)
from envgym.remote.session import check_served, served_kinds

__all__ = [
    "REMOTE_ID",
    "RemoteEnv",
    "RemoteError",
    "RemoteKwargsError",
    "RemoteParallelEnv",
    "RemoteResetNeededError",
    "ServerLostError",
    "UnknownRemoteEnvError",
    "check_served",
    "make",
    "served_kinds",
    "served_spec",
]
