"""Rollout collection for the trainer: which tasks an update plays, and playing them.

- :func:`draw_task_seeds`: the next training task seeds (fresh ones, or drawn from the task pool).
- :func:`episode_tasks` and :func:`play_rollout`: one round of an update's groups as one task
  list in one harness run (:class:`~envgym.rollout.runner.Runner`) with an agent sampling from
  the live policy; the records go to ``<run>/rollouts/update-NNNNNN[-refillK][/rank-R]``.
- :func:`play_evaluation`: greedy evaluation on the held-out split (``<run>/eval/update-NNNNNN``).

Both play environments made with the config's ``reward_wrappers``: :class:`TrainConfig` puts them
into the env kwargs it resolves, and :func:`envgym.registration.make` applies them in whichever
process steps the env.
- :func:`flat_groups`: the groups dynamic sampling drops (all returns equal).
- :class:`StopCheck`: ends a rollout at the next agent call once a stop is requested.
- :func:`light`: a trajectory cut down to what the episode metrics read (sent between ranks).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envgym.errors import StopRun
from envgym.rollout.agent import Agent, AgentInput, AgentOutput
from envgym.rollout.records import Trajectory, Turn
from envgym.rollout.runner import RunConfig, Runner
from envgym.rollout.tasks import EpisodeTask, tasks_for
from envgym.trainer.batch import collect
from envgym.trainer.config import TrainConfig
from envgym.trainer.metrics import episode_metrics
from envgym.trainer.state import EVAL_DIR, ROLLOUTS_DIR, RunState

__all__ = [
    "StopCheck",
    "contiguous",
    "draw_task_seeds",
    "episode_tasks",
    "flat_groups",
    "light",
    "play_evaluation",
    "play_rollout",
    "rollout_folder",
]


class StopCheck(Agent):
    """Wraps the rollout agent: a pending stop request ends the rollout (``StopRun``) at the next
    agent call, so a long rollout does not hold a Ctrl-C for minutes."""

    def __init__(self, inner: Agent, stop: Callable[[], bool]) -> None:
        self.inner = inner
        self._stop = stop
        self.name = inner.name
        self.chat = inner.chat
        self.wants_sample_action = inner.wants_sample_action

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        if self._stop():
            raise StopRun("training stop requested: the update's rollout is abandoned")
        return self.inner.act(batch)

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        self.inner.start_episode(episode_id, env_id, seed, member=member)

    def end_episode(self, episode_id: str) -> None:
        self.inner.end_episode(episode_id)

    def reset(self) -> None:
        self.inner.reset()

    def close(self) -> None:
        self.inner.close()


def contiguous(seeds: Sequence[int]) -> list[list[int]]:
    """``seeds`` sorted and cut into runs of consecutive integers (for the progress message)."""
    runs: list[list[int]] = []
    for value in sorted(seeds):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return runs


def light(traj: Trajectory) -> Trajectory:
    """``traj`` with only what the episode metrics read (sent between ranks)."""
    turns = [
        Turn(
            index=t.index,
            observation="",
            action=t.action if t.completion is None else "",
            reward=t.reward,
            reward_components={},
            action_valid=t.action_valid,
            format_ok=t.format_ok,
            completion=t.completion,  # the reply-diversity metrics read it (envgym.trainer.collapse)
        )
        for t in traj.turns
    ]
    return dataclasses.replace(traj, turns=turns, task={}, final_observation="", env_kwargs={}, errors=[], extra={})


def draw_task_seeds(state: RunState, count: int, used: set[int]) -> list[int]:
    """The next ``count`` training task seeds: fresh ones (advancing ``state.next_seed``), or
    drawn from the task pool skipping ``used``."""
    if state.pool is None:
        seeds = list(range(state.next_seed, state.next_seed + count))
        state.next_seed += count
        return seeds
    return [int(s) for s in state.pool.draw(count, exclude=used)]


def flat_groups(trajectories: Sequence[Trajectory], seeds: set[int]) -> set[int]:
    """The task seeds among ``seeds`` whose trainable episodes in ``trajectories`` all have the
    same return (nothing to learn from: dynamic sampling drops them); all of ``seeds`` when no
    episode is trainable."""
    import torch

    from envgym.trainer import advantages as adv_fns

    usable = collect(trajectories, group_key=lambda t: t.seed)
    if not usable.trajectories:
        return set(seeds)
    returns = torch.tensor([t.total_reward for t in usable.trajectories], dtype=torch.float32)
    ids = torch.tensor([int(t.seed) for t in usable.trajectories], dtype=torch.long)
    flat = adv_fns.zero_variance_groups(returns, ids)
    return {int(ids[i]) for i in range(len(ids)) if bool(flat[i])}


def rollout_folder(out: Path, update: int, round_: int, rank: int | None = None) -> Path:
    """Where round ``round_`` of update ``update`` is recorded (``rank``: under torchrun)."""
    folder = out / ROLLOUTS_DIR / (f"update-{update:06d}" + (f"-refill{round_ - 1}" if round_ > 1 else ""))
    return folder / f"rank-{rank}" if rank is not None else folder


def episode_tasks(
    seeds: Sequence[int], env: tuple[str, Mapping[str, Any]], max_turns: int | None, group_size: int
) -> list[EpisodeTask]:
    """``group_size`` episodes of each of ``seeds`` (sorted; group ``g`` is the ``g``-th seed)."""
    env_id, env_kwargs = env
    return list(tasks_for(env_id, sorted(seeds), group_size=group_size, env_kwargs=env_kwargs, max_turns=max_turns))


def play_rollout(
    config: TrainConfig,
    generation: Any,
    *,
    update: int,
    seeds: Sequence[int],
    env: tuple[str, Mapping[str, Any]],
    max_turns: int | None,
    folder: Path,
    stop: Callable[[], bool] | None = None,
    event: Callable[[str], None] = lambda message: None,
    on_progress: Callable[..., None] | None = None,
) -> list[Trajectory]:
    """Play ``group_size`` episodes of each of ``seeds`` with the live policy (``generation``),
    all in one harness run recorded in ``folder``, in ``env`` (``(env_id, env_kwargs)``, reward
    wrappers included: :meth:`RunState.env`, :attr:`TrainConfig.resolved_env_kwargs`).
    With ``stop``, a stop request ends the rollout with :class:`~envgym.errors.StopRun`;
    ``on_progress`` is the runner's hook (:class:`~envgym.rollout.runner.Runner`)."""
    cfg = _resolved(config)
    agent: Agent = generation.agent(
        temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.seed, name=f"policy@update{update - 1}"
    )
    if stop is not None:
        agent = StopCheck(agent, stop)
    runs = contiguous(seeds)
    shown = ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
    event(f"update {update}: rollout of {len(seeds) * cfg.group_size} episodes (seeds {shown})")
    # One task list, one harness run: the whole update's episodes share the generation batches.
    tasks = episode_tasks(seeds, env, max_turns, cfg.group_size)
    run_config = RunConfig(
        agent_options={
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_new_tokens": cfg.max_new_tokens,
            "choices": cfg.choices,
        },
        tasks=tasks,
        seed=cfg.seed,
        group_size=cfg.group_size,
        max_turns=max_turns,
        num_envs=cfg.num_envs or len(tasks),
        prompt=cfg.prompt,
        backend=cfg.rollout_backend,
        workers=cfg.rollout_workers,
        url=cfg.rollout_url,
    )
    return Runner(run_config, agent, out=folder, on_progress=on_progress).run().trajectories


def play_evaluation(
    config: TrainConfig,
    generation: Any,
    *,
    update: int,
    max_turns: int | None,
    out: Path,
    event: Callable[[str], None] = lambda message: None,
    on_progress: Callable[..., None] | None = None,
) -> dict[str, float]:
    """Greedy evaluation on the held-out split (seeds ``0 .. eval_episodes-1``), played anew into
    ``<out>/eval/update-NNNNNN``, with the config's reward wrappers
    (:attr:`TrainConfig.resolved_eval_env_kwargs`); returns the ``eval/*`` metrics.
    ``on_progress`` is the runner's hook (:class:`~envgym.rollout.runner.Runner`)."""
    cfg = _resolved(config)
    run_config = RunConfig(
        env_id=cfg.env_id,
        agent_options={"temperature": 0.0, "max_new_tokens": cfg.max_new_tokens, "choices": cfg.choices},
        episodes=cfg.eval_episodes,
        seed=0,
        env_kwargs=cfg.resolved_eval_env_kwargs,
        max_turns=max_turns,
        num_envs=cfg.num_envs or cfg.eval_episodes,
        prompt=cfg.prompt,
        backend=cfg.rollout_backend,
        workers=cfg.rollout_workers,
        url=cfg.rollout_url,
    )
    agent = generation.agent(temperature=0.0, top_p=1.0, seed=cfg.seed, name=f"policy@update{update}")
    event(f"update {update}: greedy evaluation on {cfg.eval_episodes} held-out episodes")
    folder = out / EVAL_DIR / f"update-{update:06d}"
    shutil.rmtree(folder, ignore_errors=True)  # evaluation is always played anew
    trajectories = Runner(run_config, agent, out=folder, on_progress=on_progress).run().trajectories
    return episode_metrics(trajectories, prefix="eval")


def _resolved(config: TrainConfig) -> TrainConfig:
    """``config`` with its ``auto`` settings resolved (the trainer resolves its config up front;
    a config handed straight to these functions is resolved for this device)."""
    return config.resolve() if config.auto_fields else config
