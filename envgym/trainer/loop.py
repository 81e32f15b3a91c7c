"""The training loop: roll out groups with the live policy, turn them into advantages, update.

One update:

1. **Rollout.** ``groups_per_update`` fresh task seeds, ``group_size`` episodes each, played by
   the harness's :class:`~envgym.rollout.runner.Runner` in this process with an agent that
   samples from the live policy (see :mod:`envgym.trainer.policy`). Each round is a run folder
   under ``<run>/rollouts/`` (the trajectories are kept, token ids and log-probs included).
   With ``dynamic_sampling`` the groups whose returns are all equal are dropped and fresh seeds
   are rolled out to refill the update, up to ``max_refill_rounds`` extra rounds.
2. **Advantages.** Group-relative (GRPO, Dr. GRPO, RLOO, GDPO per reward component, GiGPO's
   episode + step levels) or, for PPO, turn-level GAE on a value head read at the last prompt
   token of each turn. Functions from :mod:`envgym.trainer.advantages`.
3. **Optimisation.** ``ppo_epochs`` passes, each in ``minibatches`` optimizer steps, each step
   accumulating gradients over micro-batches of ``micro_batch_size`` sequences; the clipped
   policy loss, the KL penalty, the entropy bonus and the value loss come from
   :mod:`envgym.trainer.losses`; the gradient norm is clipped; AdamW steps.
4. **Bookkeeping.** One line of ``metrics.jsonl`` (see :mod:`envgym.trainer.metrics`), greedy
   evaluation on the held-out split every ``eval_every`` updates, a checkpoint every
   ``checkpoint_every`` updates and at the end, and ``report.md`` when the run ends.

Running again into the same folder resumes from the newest checkpoint: the update counter,
weights, optimizer, task seeds, curricula and RNG states are restored, updates after the
checkpoint are played again (their partial records are replaced), and the metrics equal those
of an uninterrupted run. A changed configuration is refused, except the fields in
:data:`~envgym.trainer.config.RESUMABLE_CHANGES` (``updates`` may grow, for instance).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import math
import os
import platform
import random
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgym.errors import ConfigError, EnvgymError
from envgym.rollout.records import Trajectory
from envgym.trainer.batch import Collected, TrainBatch, build_batch, collect
from envgym.trainer.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from envgym.trainer.config import RESUMABLE_CHANGES, TrainConfig
from envgym.trainer.metrics import MetricsLog, episode_metrics

__all__ = ["TrainResult", "Trainer", "train"]

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
META_FILE = "meta.json"
ROLLOUTS_DIR = "rollouts"
EVAL_DIR = "eval"
#: Training task seeds of run seed ``s`` start at ``s * TRAIN_SEED_STRIDE`` (runs with different
#: seeds never share tasks); evaluation always plays seeds ``0 .. eval_episodes-1`` of its split.
TRAIN_SEED_STRIDE = 1_000_000


@dataclass
class TrainResult:
    """What :meth:`Trainer.train` returns.

    Attributes:
        out: the run folder.
        rows: the ``metrics.jsonl`` lines written in this session (one per update, plus the
            update-0 evaluation of a fresh run).
        start_update: updates already done when the session started (0 for a fresh run).
        final_update: updates done when it ended.
        checkpoint: the newest checkpoint folder.
        report: ``report.md`` (``None`` when it could not be written).
        stopped: whether :meth:`Trainer.request_stop` ended the session early.
    """

    out: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    start_update: int = 0
    final_update: int = 0
    checkpoint: Path | None = None
    report: Path | None = None
    stopped: bool = False


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def _mix(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "little") >> 1


class Trainer:
    """Trains a policy on an environment as configured by a :class:`TrainConfig`.

    Args:
        config: the run.
        model: a live transformers causal LM to train instead of loading ``config.model``
            (with ``tokenizer``); resuming loads the checkpoint's weights into it.
        tokenizer: the tokenizer of ``model``.
        on_update: called with every ``metrics.jsonl`` line as it is written.
        on_event: called with short progress messages (``"rollout"``, ``"update"``...).
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        model: Any = None,
        tokenizer: Any = None,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        if not isinstance(config, TrainConfig):
            raise ConfigError(f"Trainer needs a TrainConfig, got {type(config).__name__}.")
        self.config = config
        self.out = config.out_dir
        self._model = model
        self._tokenizer = tokenizer
        self.on_update = on_update
        self.on_event = on_event
        self._stop = False
        self.policy: Any = None
        self.optimizer: Any = None
        self.next_seed = config.seed * TRAIN_SEED_STRIDE
        self.horizon: Any = None
        self.ladder: Any = None

    def request_stop(self) -> None:
        """Finish the current update, checkpoint and return (safe to call from a callback)."""
        self._stop = True

    def _event(self, message: str) -> None:
        log.info(message)
        if self.on_event is not None:
            self.on_event(message)

    # ------------------------------------------------------------------------------ setup
    def _check_envs(self) -> None:
        """Fail on a bad id or bad environment arguments before any model loads."""
        from envgym.registration import make, spec

        cfg = self.config
        variants = [(cfg.env_id, dict(cfg.env_kwargs))]
        if cfg.difficulty is not None:
            variants = [cfg.level_env(level) for level in cfg.difficulty["levels"]]
        if cfg.eval_every:
            variants.append((cfg.env_id, cfg.resolved_eval_env_kwargs))
        for env_id, kwargs in variants:
            if spec(env_id).kind != "gymnasium":
                raise ConfigError(f"{env_id!r} is a multi-agent environment; the trainer needs single-agent ids.")
            make(env_id, **kwargs).close()

    def _open_folder(self) -> Path | None:
        """Create or reopen the run folder; refuse a changed config. Returns the checkpoint to
        resume from (``None``: a fresh start)."""
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        config_path = self.out / CONFIG_FILE
        checkpoint = latest_checkpoint(self.out)
        if config_path.exists():
            try:
                old = json.loads(config_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise ConfigError(
                    f"{config_path} is not valid JSON ({err}); remove the folder or pick another --out."
                ) from err
            changes = [line for line in cfg.changes_from(old) if line.split(":", 1)[0] not in RESUMABLE_CHANGES]
            if changes and checkpoint is not None:
                raise ConfigError(
                    f"{self.out} holds a training run with a different configuration ({'; '.join(changes)}). Resume it "
                    "with the same settings (only updates, checkpoint_every, keep_checkpoints and tensorboard may "
                    "change), or train into another folder (--out)."
                )
        tmp = config_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(cfg.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, config_path)
        self._write_meta(checkpoint)
        return checkpoint

    def _write_meta(self, checkpoint: Path | None) -> None:
        from envgym.rollout.rundir import git_commit, package_versions

        path = self.out / META_FILE
        meta: dict[str, Any] = {}
        if path.exists():
            try:
                meta = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                meta = {}
        session = {
            "started_at": _now(),
            "argv": list(sys.argv),
            "resumed_from": str(checkpoint) if checkpoint else None,
        }
        meta.setdefault("created_at", session["started_at"])
        meta.update(
            {
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "packages": package_versions(),
                "git": git_commit(),
            }
        )
        meta.setdefault("sessions", []).append(session)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def _build(self) -> None:
        import torch

        from envgym.trainer.policy import load_policy

        cfg = self.config
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.policy = load_policy(cfg, model=self._model, tokenizer=self._tokenizer)
        self.optimizer = torch.optim.AdamW(self.policy.trainable_parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.generation = self.policy.generation()
        from envgym.trainer import curriculum

        if cfg.horizon is not None:
            self.horizon = curriculum.HorizonSchedule([tuple(stage) for stage in cfg.horizon])
        if cfg.difficulty is not None:
            ladder = cfg.difficulty
            self.ladder = curriculum.DifficultyController(
                list(ladder["levels"]),
                target=tuple(ladder["target"]) if isinstance(ladder["target"], list) else float(ladder["target"]),
                window=int(ladder["window"]),
                min_episodes=int(ladder["min_episodes"]),
            )

    def _state(self, update: int) -> dict[str, Any]:
        return {
            "update": update,
            "next_seed": self.next_seed,
            "horizon": self.horizon.state_dict() if self.horizon is not None else None,
            "difficulty": self.ladder.state_dict() if self.ladder is not None else None,
            "config": self.config.to_dict(),
        }

    def _restore(self, checkpoint: Path) -> int:
        state = load_checkpoint(checkpoint, policy=self.policy, optimizer=self.optimizer)
        self.next_seed = int(state["next_seed"])
        if self.horizon is not None and state.get("horizon") is not None:
            self.horizon.load_state_dict(state["horizon"])
        if self.ladder is not None and state.get("difficulty") is not None:
            self.ladder.load_state_dict(state["difficulty"])
        return int(state["update"])

    def _discard_after(self, update: int) -> None:
        """Remove the records of updates after ``update`` (they are played again)."""
        for sub in (ROLLOUTS_DIR, EVAL_DIR):
            root = self.out / sub
            if not root.is_dir():
                continue
            for folder in root.iterdir():
                number = folder.name.removeprefix("update-").split("-")[0]
                if number.isdigit() and int(number) > update:
                    shutil.rmtree(folder, ignore_errors=True)

    # ------------------------------------------------------------------------------ run
    def train(self) -> TrainResult:
        """Run (or resume) the configured updates; see the module docstring."""
        cfg = self.config
        self._check_envs()
        checkpoint = self._open_folder()
        self._build()
        start = self._restore(checkpoint) if checkpoint is not None else 0
        if checkpoint is not None:
            self._event(f"resuming {self.out} from {checkpoint.name} (update {start} of {cfg.updates})")
        self._discard_after(start)
        metrics_log = MetricsLog(self.out, tensorboard=cfg.tensorboard)
        metrics_log.truncate_after(start)
        result = TrainResult(out=self.out, start_update=start, final_update=start, checkpoint=checkpoint)
        saved_at = start if checkpoint is not None else -1
        try:
            if start == 0 and cfg.eval_every:
                row = metrics_log.write(0, self._evaluate(0))
                result.rows.append(row)
                self._emit(row)
            for update in range(start + 1, cfg.updates + 1):
                metrics = self._update(update)
                if cfg.eval_every and (update % cfg.eval_every == 0 or update == cfg.updates):
                    metrics.update(self._evaluate(update))
                row = metrics_log.write(update, metrics)
                result.rows.append(row)
                result.final_update = update
                self._emit(row)
                last = update == cfg.updates
                if (cfg.checkpoint_every and update % cfg.checkpoint_every == 0) or last or self._stop:
                    result.checkpoint = self._save(update)
                    saved_at = update
                if self._stop and not last:
                    result.stopped = True
                    self._event(f"stopped after update {update}; run again with the same settings to resume")
                    break
            if saved_at != result.final_update and result.final_update > 0:
                result.checkpoint = self._save(result.final_update)
        finally:
            metrics_log.close()
        if result.final_update >= cfg.updates and not result.stopped:
            result.report = self._report()
        return result

    def _emit(self, row: dict[str, Any]) -> None:
        if self.on_update is not None:
            self.on_update(row)

    def _save(self, update: int) -> Path:
        self._event(f"checkpoint at update {update}")
        return save_checkpoint(
            self.out,
            update,
            policy=self.policy,
            optimizer=self.optimizer,
            state=self._state(update),
            keep=self.config.keep_checkpoints,
        )

    def _report(self) -> Path | None:
        from envgym.trainer.report import write_report

        try:
            return write_report(self.out)
        except EnvgymError as err:  # a missing matplotlib must not fail a finished run
            log.warning("no report.md: %s", err)
            return None

    # ------------------------------------------------------------------------------ rollouts
    def _max_turns(self, update: int) -> int | None:
        if self.horizon is not None:
            return int(self.horizon.max_turns(update - 1))
        return self.config.max_turns

    def _env(self) -> tuple[str, dict[str, Any]]:
        """The env id and arguments of this update's rollouts (the difficulty ladder's level)."""
        if self.ladder is not None:
            return self.config.level_env(self.ladder.current)
        return self.config.env_id, dict(self.config.env_kwargs)

    def _rollout(
        self, update: int, round_: int, groups: int, env: tuple[str, Mapping[str, Any]], max_turns: int | None
    ) -> list[Trajectory]:
        from envgym.rollout.runner import RunConfig, Runner

        cfg = self.config
        seed = self.next_seed
        self.next_seed += groups
        episodes = groups * cfg.group_size
        env_id, env_kwargs = env
        run_config = RunConfig(
            env_id=env_id,
            agent_options={"temperature": cfg.temperature, "top_p": cfg.top_p, "max_new_tokens": cfg.max_new_tokens},
            episodes=episodes,
            seed=seed,
            group_size=cfg.group_size,
            env_kwargs=dict(env_kwargs),
            max_turns=max_turns,
            num_envs=cfg.num_envs or episodes,
            prompt=cfg.prompt,
        )
        agent = self.generation.agent(
            temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.seed, name=f"policy@update{update - 1}"
        )
        name = f"update-{update:06d}" + (f"-refill{round_ - 1}" if round_ > 1 else "")
        self._event(f"update {update}: rollout of {episodes} episodes (seeds {seed}..{seed + groups - 1})")
        return Runner(run_config, agent, out=self.out / ROLLOUTS_DIR / name).run().trajectories

    def _evaluate(self, update: int) -> dict[str, float]:
        from envgym.rollout.runner import RunConfig, Runner

        cfg = self.config
        run_config = RunConfig(
            env_id=cfg.env_id,
            agent_options={"temperature": 0.0, "max_new_tokens": cfg.max_new_tokens},
            episodes=cfg.eval_episodes,
            seed=0,
            env_kwargs=cfg.resolved_eval_env_kwargs,
            max_turns=self._max_turns(max(update, 1)),
            num_envs=cfg.num_envs or cfg.eval_episodes,
            prompt=cfg.prompt,
        )
        agent = self.generation.agent(temperature=0.0, top_p=1.0, seed=cfg.seed, name=f"policy@update{update}")
        self._event(f"update {update}: greedy evaluation on {cfg.eval_episodes} held-out episodes")
        folder = self.out / EVAL_DIR / f"update-{update:06d}"
        shutil.rmtree(folder, ignore_errors=True)  # evaluation is always played anew
        trajectories = Runner(run_config, agent, out=folder).run().trajectories
        return episode_metrics(trajectories, prefix="eval")

    # ------------------------------------------------------------------------------ one update
    def _update(self, update: int) -> dict[str, Any]:
        import torch

        from envgym.trainer import advantages as adv_fns

        cfg = self.config
        t0 = time.perf_counter()
        max_turns = self._max_turns(update)
        env = self._env()
        metrics: dict[str, Any] = {}
        if max_turns is not None:
            metrics["curriculum/max_turns"] = max_turns
        if self.ladder is not None:
            metrics["curriculum/level"] = self.ladder.index
        played: list[Trajectory] = []
        kept: list[list[Trajectory]] = []  # groups trained on
        rounds = zero_variance = 0
        need = cfg.groups_per_update
        while True:
            rounds += 1
            trajectories = self._rollout(update, rounds, need, env, max_turns)
            played += trajectories
            if self.ladder is not None:
                self.ladder.record([t.success for t in trajectories if t.scored])
            groups: dict[int, list[Trajectory]] = {}
            for traj in trajectories:
                groups.setdefault(int(traj.seed if traj.seed is not None else -1), []).append(traj)
            if cfg.dynamic_sampling:
                usable = collect(trajectories, group_key=lambda t: t.seed)
                if usable.trajectories:
                    returns = torch.tensor([t.total_reward for t in usable.trajectories], dtype=torch.float32)
                    ids = torch.tensor([int(t.seed) for t in usable.trajectories], dtype=torch.long)
                    flat = adv_fns.zero_variance_groups(returns, ids)
                    dead = {int(ids[i]) for i in range(len(ids)) if bool(flat[i])}
                else:
                    dead = set(groups)
                zero_variance += len(dead & set(groups))
                kept += [members for key, members in groups.items() if key not in dead]
            else:
                kept += list(groups.values())
            if not cfg.dynamic_sampling or len(kept) >= cfg.groups_per_update or rounds > cfg.max_refill_rounds:
                break
            need = cfg.groups_per_update - len(kept)
        kept = kept[: cfg.groups_per_update]
        rollout_s = time.perf_counter() - t0
        metrics.update(episode_metrics(played))
        generated = sum(t.completion_tokens for t in played)
        metrics["dynamic/rounds"] = rounds
        if cfg.dynamic_sampling:
            metrics["dynamic/zero_variance_groups"] = zero_variance
            metrics["dynamic/kept_groups"] = len(kept)
        metrics["perf/rollout_s"] = rollout_s
        metrics["perf/generated_tokens_per_s"] = generated / rollout_s if rollout_s > 0 else 0.0
        collected = collect([t for group in kept for t in group], group_key=lambda t: t.seed)
        metrics["batch/episodes"] = len(collected.trajectories)
        metrics["batch/turns"] = len(collected.samples)
        metrics["batch/excluded_episodes"] = collected.excluded_episodes
        metrics["batch/excluded_turns"] = collected.excluded_turns
        metrics["lr"] = cfg.lr
        if not collected.samples:
            log.warning("update %d: nothing to train on (no scored episode with token ids); skipped", update)
            return metrics
        t1 = time.perf_counter()
        batch = self._make_batch(collected)
        metrics["policy/advantage_std"] = _std([float(b) for b in self._turn_advantages])
        metrics.update(self._optimise(update, batch))
        self.generation.sync()
        update_s = time.perf_counter() - t1
        metrics["perf/update_s"] = update_s
        processed = int(batch.attention_mask.sum().item()) * cfg.ppo_epochs
        metrics["perf/tokens_per_s"] = processed / update_s if update_s > 0 else 0.0
        return metrics

    # ------------------------------------------------------------------------------ advantages
    def _make_batch(self, collected: Collected) -> TrainBatch:
        import torch

        from envgym.trainer import advantages as adv_fns

        cfg = self.config
        trajs = collected.trajectories
        seeds = [int(t.seed if t.seed is not None else -1) for t in trajs]
        order = {s: i for i, s in enumerate(dict.fromkeys(seeds))}
        group_ids = torch.tensor([order[s] for s in seeds], dtype=torch.long)
        returns = torch.tensor([t.total_reward for t in trajs], dtype=torch.float32)
        per_turn: list[Any]
        returns_per_sample: list[float] | None = None
        old_values: list[float] | None = None
        if cfg.algo == "ppo":
            per_turn, returns_per_turn, values_per_turn = self._gae(collected)
            returns_per_sample = [float(returns_per_turn[s.episode][s.turn]) for s in collected.samples]
            old_values = [float(values_per_turn[s.episode][s.turn]) for s in collected.samples]
        else:
            if cfg.algo == "rloo":
                episode_adv = adv_fns.rloo_advantages(returns, group_ids)
            elif cfg.reward_norm == "gdpo":
                names = sorted({k for t in trajs for k in t.reward_components})
                components = {
                    name: torch.tensor([float(t.reward_components.get(name, 0.0)) for t in trajs]) for name in names
                }
                episode_adv = adv_fns.gdpo_advantages(components, group_ids, normalize_std=cfg.algo != "dr_grpo")
            else:
                episode_adv = adv_fns.grpo_advantages(returns, group_ids, normalize_std=cfg.algo != "dr_grpo")
            if cfg.algo == "gigpo":
                keys = [[turn.observation for turn in t.turns] for t in trajs]
                step_returns = [
                    adv_fns.discounted_returns(torch.tensor(t.rewards, dtype=torch.float32), cfg.gamma) for t in trajs
                ]
                step_adv = adv_fns.gigpo_step_advantages(keys, step_returns, group_ids)
                per_turn = adv_fns.combine_episode_and_step(episode_adv, step_adv, step_weight=cfg.step_weight)
            else:
                per_turn = [episode_adv[i].expand(len(t.turns)) for i, t in enumerate(trajs)]
        advantages = [float(per_turn[s.episode][s.turn]) for s in collected.samples]
        if cfg.algo == "ppo" and len(advantages) > 1:  # PPO: advantages whitened over the batch
            mean = sum(advantages) / len(advantages)
            std = _std(advantages)
            advantages = [(a - mean) / (std + 1e-8) for a in advantages]
        self._turn_advantages = advantages
        batch = build_batch(
            collected.samples,
            advantages,
            pad_id=self.policy.pad_id,
            returns=returns_per_sample,
            old_values=old_values,
        )
        if cfg.kl_coef > 0:
            batch.ref_logprobs = self._no_grad_logprobs(batch, reference=True)
        return batch

    def _no_grad_logprobs(self, batch: TrainBatch, *, reference: bool) -> Any:
        import torch

        width = batch.input_ids.shape[1]
        parts = []
        with torch.no_grad():
            for micro in batch.split(self.config.micro_batch_size):
                lp = self.policy.forward(micro, reference=reference).logprobs.float().cpu()
                parts.append(torch.nn.functional.pad(lp, (0, width - lp.shape[1])))
        return torch.cat(parts)

    def _gae(self, collected: Collected) -> tuple[list[Any], list[Any], list[Any]]:
        """PPO: the value of every turn (before the update), then GAE per episode.

        A turn left out of the batch (no token ids) keeps value 0. Every episode end counts as
        terminal: a turn limit ends the task, no reward can follow it.
        """
        import torch

        from envgym.trainer import advantages as adv_fns

        cfg = self.config
        probe = build_batch(collected.samples, [0.0] * len(collected.samples), pad_id=self.policy.pad_id)
        values: list[float] = []
        with torch.no_grad():
            for micro in probe.split(cfg.micro_batch_size):
                values += self.policy.forward(micro, values=True).values.float().cpu().tolist()
        per_turn, returns, turn_values = [], [], []
        for episode, traj in enumerate(collected.trajectories):
            v = torch.zeros(len(traj.turns), dtype=torch.float32)
            for turn, position in enumerate(collected.turn_index[episode]):
                if position is not None:
                    v[turn] = values[position]
            rewards = torch.tensor(traj.rewards, dtype=torch.float32)
            adv, ret = adv_fns.gae(rewards, v, last_value=0.0, terminated=True, gamma=cfg.gamma, lam=cfg.lam)
            per_turn.append(adv)
            returns.append(ret)
            turn_values.append(v)
        # samples index turns by Turn.index, which is the position in traj.turns
        return per_turn, returns, turn_values

    # ------------------------------------------------------------------------------ optimisation
    def _optimise(self, update: int, batch: TrainBatch) -> dict[str, float]:
        import torch

        from envgym.trainer import losses

        cfg = self.config
        policy = self.policy
        params = policy.trainable_parameters()
        aggregation = cfg.aggregation
        per_token = aggregation == "token-mean"
        generator = torch.Generator().manual_seed(_mix(cfg.seed, update))
        n = len(batch)
        sums: dict[str, float] = {}
        weights: dict[str, float] = {}
        ratio_max = -math.inf
        grad_norms: list[float] = []
        policy.train()
        for _epoch in range(cfg.ppo_epochs):
            order = torch.randperm(n, generator=generator) if (cfg.ppo_epochs > 1 or cfg.minibatches > 1) else None
            index = order if order is not None else torch.arange(n)
            for chunk in torch.tensor_split(index, cfg.minibatches):
                if len(chunk) == 0:
                    continue
                minibatch = batch.select(chunk)
                total = float(minibatch.tokens if per_token else len(minibatch))
                self.optimizer.zero_grad(set_to_none=True)
                for micro in minibatch.split(cfg.micro_batch_size):
                    share = (micro.tokens if per_token else len(micro)) / total
                    loss, stats = self._micro_loss(micro, losses, aggregation)
                    (loss["total"] * share).backward()
                    tokens = float(micro.tokens)
                    for key, value in loss.items():
                        _add(sums, weights, f"loss/{key}", float(value.detach()), share)
                    for key in ("clip_fraction", "approx_kl", "ratio_mean"):
                        if key in stats:
                            _add(sums, weights, f"policy/{key}", _scalar(stats[key]), tokens)
                    if "ratio_max" in stats:
                        ratio_max = max(ratio_max, _scalar(stats["ratio_max"]))
                    _add(sums, weights, "policy/entropy", float(stats["entropy"]), tokens)
                limit = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf
                norm = torch.nn.utils.clip_grad_norm_(params, limit)
                grad_norms.append(float(norm))
                self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        out = {key: sums[key] / weights[key] for key in sums if weights[key] > 0}
        if ratio_max > -math.inf:
            out["policy/ratio_max"] = ratio_max
        out["grad_norm"] = sum(grad_norms) / len(grad_norms)
        out["optimizer_steps"] = float(len(grad_norms))
        out["tokens"] = float(batch.tokens)
        return out

    def _micro_loss(self, micro: TrainBatch, losses: Any, aggregation: str) -> tuple[dict[str, Any], dict[str, Any]]:
        import torch

        cfg = self.config
        out = self.policy.forward(micro, entropy=True, values=cfg.algo == "ppo", entropy_grad=cfg.entropy_coef != 0)
        mask = micro.loss_mask.to(out.logprobs.device)
        device = out.logprobs.device
        policy, stats = losses.policy_loss(
            out.logprobs,
            micro.old_logprobs.to(device),
            micro.advantages.to(device),
            mask,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
            aggregation=aggregation,
            max_tokens=cfg.max_new_tokens,
        )
        terms: dict[str, Any] = {"policy": policy}
        entropy = losses.aggregate(out.entropy, mask, aggregation, max_tokens=cfg.max_new_tokens)
        if cfg.kl_coef > 0:
            per_token = losses.kl_penalty(out.logprobs, micro.ref_logprobs.to(device), mask, estimator=cfg.kl_estimator)
            terms["kl"] = losses.aggregate(per_token, mask, aggregation, max_tokens=cfg.max_new_tokens)
        if cfg.algo == "ppo":
            terms["value"] = losses.value_loss(
                out.values,
                micro.returns.to(device),
                torch.ones_like(out.values),
                old_values=micro.old_values.to(device),
                clip_range=cfg.value_clip,
            )
        terms["total"] = losses.combine(
            policy,
            kl=terms.get("kl"),
            kl_coef=cfg.kl_coef,
            entropy=entropy,
            entropy_coef=cfg.entropy_coef,
            value=terms.get("value"),
            vf_coef=cfg.vf_coef if cfg.algo == "ppo" else 0.0,
        )
        token_entropy = (out.entropy.detach() * mask).sum() / mask.sum().clamp_min(1)
        return terms, {**stats, "entropy": float(token_entropy)}


def _scalar(value: Any) -> float:
    return float(value.item()) if hasattr(value, "item") else float(value)


def _add(sums: dict[str, float], weights: dict[str, float], key: str, value: float, weight: float) -> None:
    sums[key] = sums.get(key, 0.0) + value * weight
    weights[key] = weights.get(key, 0.0) + weight


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def train(config: TrainConfig | Mapping[str, Any], **kwargs: Any) -> TrainResult:
    """Train as configured (a :class:`TrainConfig` or a mapping of its fields); see :class:`Trainer`."""
    if not isinstance(config, TrainConfig):
        config = TrainConfig.from_dict(config)
    return Trainer(config, **kwargs).train()
