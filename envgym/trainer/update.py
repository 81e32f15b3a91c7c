"""One update's optimisation: an update's episodes into a :class:`~envgym.trainer.batch.TrainBatch`
with the chosen algorithm's advantages, then the policy-gradient steps.

:class:`PolicyUpdate` holds the policy, the optimizer, the algorithm and the data-parallel group.

- :meth:`PolicyUpdate.make_batch`: the algorithm's per-turn advantages (whitened over the whole
  batch when the algorithm asks), the value targets of value-head algorithms, the old log-probs
  when the records cannot serve (top-p) and the reference log-probs for the KL term.
- :meth:`PolicyUpdate.optimise`: ``ppo_epochs`` passes of ``minibatches`` optimizer steps, each
  accumulating gradients over micro-batches; the loss terms come from
  :mod:`envgym.trainer.losses` (the value term only for algorithms with a value head).
  Micro-batches keep the rows of one prompt together (:meth:`PolicyUpdate.micro_order`), so a
  GRPO group's prompt is forwarded once (:mod:`envgym.trainer.packing`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from envgym.trainer.algorithms import Algorithm, Episodes
from envgym.trainer.batch import Collected, TrainBatch, build_batch
from envgym.trainer.config import TrainConfig
from envgym.trainer.distributed import Distributed

__all__ = ["PolicyUpdate", "std"]


@dataclass
class PolicyUpdate:
    """The optimisation of one update, for :class:`~envgym.trainer.loop.Trainer`.

    Attributes:
        config: the run's settings.
        algorithm: the chosen algorithm (advantages, value head, whitening).
        policy: the live policy (:mod:`envgym.trainer.policy`).
        optimizer: its optimizer.
        dist: the data-parallel group (one process when inactive).
    """

    config: TrainConfig
    algorithm: Algorithm
    policy: Any
    optimizer: Any
    dist: Distributed

    # ------------------------------------------------------------------------------ advantages
    def make_batch(self, collected: Collected) -> tuple[TrainBatch, list[float]]:
        """The training batch of ``collected``, and every rank's per-turn advantages (for metrics)."""
        import torch

        cfg = self.config
        trajs = collected.trajectories
        seeds = [int(t.seed if t.seed is not None else -1) for t in trajs]
        order = {s: i for i, s in enumerate(dict.fromkeys(seeds))}
        episodes = Episodes(
            trajectories=trajs,
            group_ids=torch.tensor([order[s] for s in seeds], dtype=torch.long),
            returns=torch.tensor([t.total_reward for t in trajs], dtype=torch.float32),
            config=cfg,
            turn_values=lambda: self.turn_values(collected),
        )
        result = self.algorithm.advantages(episodes)
        per_turn = result.per_turn
        returns_per_sample: list[float] | None = None
        old_values: list[float] | None = None
        if result.returns is not None and result.values is not None:
            returns_per_sample = [float(result.returns[s.episode][s.turn]) for s in collected.samples]
            old_values = [float(result.values[s.episode][s.turn]) for s in collected.samples]
        advantages = [float(per_turn[s.episode][s.turn]) for s in collected.samples]
        everyone = [a for part in self.dist.gather(advantages) for a in part] if self.dist.active else advantages
        if self.algorithm.whiten and len(everyone) > 1:  # e.g. PPO: whitened over the (whole) batch
            mean = sum(everyone) / len(everyone)
            spread = std(everyone)
            advantages = [(a - mean) / (spread + 1e-8) for a in advantages]
            everyone = [(a - mean) / (spread + 1e-8) for a in everyone]
        batch = build_batch(
            collected.samples,
            advantages,
            pad_id=self.policy.pad_id,
            returns=returns_per_sample,
            old_values=old_values,
        )
        if not all(sample.logprobs_match for sample in collected.samples):
            # The records hold no log-probs of the untruncated policy at this temperature (top-p
            # truncated them): recompute them. The weights are still the ones that sampled.
            batch.old_logprobs = self.no_grad_logprobs(batch, reference=False)
        if cfg.kl_coef > 0:
            batch.ref_logprobs = self.no_grad_logprobs(batch, reference=True)
        return batch, everyone

    def no_grad_logprobs(self, batch: TrainBatch, *, reference: bool) -> Any:
        """The sampling (or, with ``reference``, the reference) policy's log-probs of ``batch``."""
        import torch

        width = batch.input_ids.shape[1]
        parts = []
        was_training = self.policy.model.training
        self.policy.train(False)  # no dropout: these are the sampling policy's numbers
        order = self.micro_order(batch)
        try:
            with torch.no_grad():
                for micro in batch.split_in_order(order, self.config.micro_batch_size):
                    lp = self.policy.forward(micro, reference=reference).logprobs.float().cpu()
                    parts.append(torch.nn.functional.pad(lp, (0, width - lp.shape[1])))
        finally:
            self.policy.train(was_training)
        out = torch.empty((len(batch), width), dtype=torch.float32)
        out[order] = torch.cat(parts)  # back to the batch's order
        return out

    def micro_order(self, batch: TrainBatch) -> Any:
        """The order in which ``batch``'s rows are cut into micro-batches: a prompt's rows together
        when the policy forwards shared prompts once (:meth:`TrainBatch.prompt_order`), else by
        length (:meth:`TrainBatch.length_order`)."""
        return batch.prompt_order() if self.policy.share_prompts else batch.length_order()

    def turn_values(self, collected: Collected) -> list[Any]:
        """The value head's estimate of every turn before the update, per episode (value-head
        algorithms). A turn left out of the batch (no token ids) keeps value 0."""
        import torch

        probe = build_batch(collected.samples, [0.0] * len(collected.samples), pad_id=self.policy.pad_id)
        # Prompt-shared packing wants a prompt's rows together; the per-row forward takes them in order.
        order = probe.prompt_order() if self.policy.share_prompts else torch.arange(len(probe))
        parts = []
        with torch.no_grad():
            for micro in probe.split_in_order(order, self.config.micro_batch_size):
                parts.append(self.policy.forward(micro, values=True).values.float().cpu())
        values = torch.empty(len(probe), dtype=torch.float32)
        values[order] = torch.cat(parts)  # back to the samples' order
        turn_values = []
        for episode, traj in enumerate(collected.trajectories):
            v = torch.zeros(len(traj.turns), dtype=torch.float32)
            # samples index turns by Turn.index, which is the position in traj.turns
            for turn, position in enumerate(collected.turn_index[episode]):
                if position is not None:
                    v[turn] = values[position]
            turn_values.append(v)
        return turn_values

    # ------------------------------------------------------------------------------ optimisation
    def optimise(
        self, update: int, batch: TrainBatch, *, on_progress: Callable[..., None] | None = None
    ) -> dict[str, float]:
        """``ppo_epochs`` passes of ``minibatches`` optimizer steps over ``batch``.

        ``on_progress`` is called as ``on_progress(done=..., total=...)`` with the micro-batches
        done of this rank's total (a micro-batch whose rows all have zero advantage is done at once).

        Each micro-batch's loss is weighted by its share of the step's tokens (or sequences)
        summed over every rank, and multiplied by the number of ranks because
        ``DistributedDataParallel`` averages the gradients: a step's gradient is then the one a
        single process would compute over all the ranks' sequences. A rank with no sequence in
        a step still joins its all-reduce with a zero-weight pass.
        """
        import torch

        from envgym.trainer import losses

        cfg = self.config
        dist = self.dist
        policy = self.policy
        params = policy.trainable_parameters()
        aggregation = cfg.aggregation
        per_token = aggregation == "token-mean"
        generator = torch.Generator().manual_seed(mix(cfg.seed, update))
        n = len(batch)
        sums: dict[str, float] = {}
        weights: dict[str, float] = {}
        ratio_max = -math.inf
        grad_norms: list[float] = []
        # With the policy loss alone (no KL, entropy or value term), a sequence whose advantages
        # are all 0 has a gradient of exactly 0: it is left out of the forward and backward passes
        # (its tokens still count in the step's normaliser, so the step is the same). Its tokens
        # are then missing from the policy/* statistics.
        skip_idle = cfg.kl_coef == 0 and cfg.entropy_coef == 0 and not self.algorithm.value_head
        skipped = 0
        # Minibatch sizes do not depend on the shuffle: the micro-batch count is known up front.
        sizes = [len(chunk) for chunk in torch.tensor_split(torch.arange(n), cfg.minibatches)]
        progress = {"done": 0, "total": cfg.ppo_epochs * sum(-(-size // cfg.micro_batch_size) for size in sizes)}

        def advance() -> None:
            progress["done"] += 1
            if on_progress is not None:
                on_progress(**progress)

        if on_progress is not None:
            on_progress(**progress)
        policy.train()
        for _epoch in range(cfg.ppo_epochs):
            order = torch.randperm(n, generator=generator) if (cfg.ppo_epochs > 1 or cfg.minibatches > 1) else None
            index = order if order is not None else torch.arange(n)
            minibatches = [
                batch.select(chunk) if len(chunk) else None for chunk in torch.tensor_split(index, cfg.minibatches)
            ]
            local = [(mb.tokens if per_token else len(mb)) if mb is not None else 0 for mb in minibatches]
            totals = dist.sum(local)
            for minibatch, total in zip(minibatches, totals, strict=True):
                if total <= 0:
                    continue  # empty on every rank: no step
                self.optimizer.zero_grad(set_to_none=True)
                # (micro-batch, its share of the step, the share it had before idle rows were left out)
                parts: list[tuple[TrainBatch, float, float]] = []
                if minibatch is None:
                    micros: list[TrainBatch] = []
                else:
                    micros = minibatch.split_in_order(self.micro_order(minibatch), cfg.micro_batch_size)
                for micro in micros:
                    full = (micro.tokens if per_token else len(micro)) / total
                    if skip_idle:
                        active = _active_rows(micro)
                        if len(active) < len(micro):
                            skipped += len(micro) - len(active)
                            if not active:
                                for key in ("loss/policy", "loss/total"):  # its loss is exactly 0
                                    _add(sums, weights, key, 0.0, full)
                                advance()
                                continue
                            micro = micro.select(active)
                    parts.append((micro, (micro.tokens if per_token else len(micro)) / total, full))
                real = len(parts)  # micro-batches of this rank (not the stand-in below)
                if not parts and dist.active:
                    parts = [(batch.select([0]), 0.0, 0.0)]  # join the all-reduce, add nothing
                for i, (micro, share, full) in enumerate(parts):
                    with policy.no_sync() if i < len(parts) - 1 else nullcontext():
                        loss, stats = self.micro_loss(micro, losses, aggregation)
                        (loss["total"] * (share * dist.world_size)).backward()
                    if i < real:
                        advance()
                    if share == 0:
                        continue
                    tokens = float(micro.tokens)
                    for key, value in loss.items():
                        # Left-out rows add 0 to the micro-batch's loss: report it over all its rows.
                        _add(sums, weights, f"loss/{key}", float(value.detach()) * (share / full), full)
                    for key in ("clip_fraction", "approx_kl", "ratio_mean"):
                        if key in stats:
                            _add(sums, weights, f"policy/{key}", _scalar(stats[key]), tokens)
                    if "ratio_max" in stats:
                        ratio_max = max(ratio_max, _scalar(stats["ratio_max"]))
                    _add(sums, weights, "policy/entropy", float(stats["entropy"]), tokens)
                if all(param.grad is None for param in params):
                    for param in params:  # every sequence skipped: AdamW still steps, on a zero gradient
                        param.grad = torch.zeros_like(param)
                limit = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf
                norm = torch.nn.utils.clip_grad_norm_(params, limit)
                grad_norms.append(float(norm))
                self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if dist.active:
            merged_sums: dict[str, float] = {}
            merged_weights: dict[str, float] = {}
            for part_sums, part_weights in dist.gather((sums, weights)):
                for key, value in part_sums.items():
                    merged_sums[key] = merged_sums.get(key, 0.0) + value
                    merged_weights[key] = merged_weights.get(key, 0.0) + part_weights[key]
            sums, weights = merged_sums, merged_weights
            ratio_max = dist.max([ratio_max])[0]
        out = {key: sums[key] / weights[key] for key in sums if weights[key] > 0}
        if ratio_max > -math.inf:
            out["policy/ratio_max"] = ratio_max
        if grad_norms:
            out["grad_norm"] = sum(grad_norms) / len(grad_norms)
        out["optimizer_steps"] = float(len(grad_norms))
        out["batch/skipped_zero_advantage"] = dist.sum([float(skipped)])[0]
        out["tokens"] = dist.sum([float(batch.tokens)])[0]
        return out

    def micro_loss(self, micro: TrainBatch, losses: Any, aggregation: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The loss terms of one micro-batch (``policy``, ``kl``, ``value``, ``total``) and its
        statistics (clip fraction, ratios, mean token entropy)."""
        import torch

        cfg = self.config
        value_head = self.algorithm.value_head
        out = self.policy.forward(micro, entropy=True, values=value_head, entropy_grad=cfg.entropy_coef != 0)
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
        if value_head:
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
            vf_coef=cfg.vf_coef if value_head else 0.0,
        )
        token_entropy = (out.entropy.detach() * mask).sum() / mask.sum().clamp_min(1)
        return terms, {**stats, "entropy": float(token_entropy)}


def mix(*parts: object) -> int:
    """A stable non-negative 63-bit seed from ``parts`` (the minibatch order of an update)."""
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "little") >> 1


def std(values: Sequence[float]) -> float:
    """The sample standard deviation of ``values`` (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _scalar(value: Any) -> float:
    return float(value.item()) if hasattr(value, "item") else float(value)


def _add(sums: dict[str, float], weights: dict[str, float], key: str, value: float, weight: float) -> None:
    sums[key] = sums.get(key, 0.0) + value * weight
    weights[key] = weights.get(key, 0.0) + weight


def _active_rows(batch: TrainBatch) -> list[int]:
    """Rows of ``batch`` with a non-zero advantage on at least one trained token."""
    nonzero = (batch.advantages * batch.loss_mask).abs().sum(dim=-1) > 0
    return [int(i) for i in nonzero.nonzero().flatten().tolist()]
