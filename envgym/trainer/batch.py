"""From trajectories to training tensors, using the exact token ids the agent recorded.

Every agent turn becomes one training sequence: ``prompt_token_ids + token_ids`` exactly as
recorded by the agent (the text is never tokenised again). The loss mask is 1 on the completion
tokens only, so the prompt (the environment's text, the system prompt and the history) carries
no loss. The recorded per-token log-probs are the old log-probabilities of the importance
ratio, and the turn's advantage is broadcast to its completion tokens.

**Which recorded log-probs.** The trained policy at sampling temperature ``T`` is
``softmax(logits / T)`` (as in verl); top-p / top-k truncation is a sampling device, not part of
the policy. The ``hf`` agent records two lists per turn: ``Turn.logprobs`` (``log_softmax(logits)``,
``T = 1``, never truncated) and ``Turn.extra["sampling_logprobs"]`` (``log_softmax(logits / T)``
restricted to the top-p / top-k set and renormalised), with ``extra["sampling"]`` naming ``T``,
``top_p`` and ``top_k``. :func:`collect` (with the run's ``temperature``) takes ``Turn.logprobs`` at
``T = 1`` and the sampling log-probs at ``T != 1`` when nothing truncated them; when they were
truncated (``top_p < 1``) or restricted to the admissible actions (``choices="admissible"``,
``extra["sampling"]["restricted"]``) the sampling list is not the policy's, and the sample is flagged
(``TurnSample.logprobs_match = False``) so the trainer recomputes its old log-probs with one
forward pass before the update.

**Forced tokens.** In a reply drawn among the admissible actions, a token that was the only
continuation of the actions (``click(`` in ``click(3)`` among ``click(1)`` ... ``click(9)``,
``Turn.extra["forced_tokens"]``) had probability 1 under the policy that drew it: it carries no
decision, so it carries no loss (``TurnSample.forced``; its loss-mask entry is 0). Counted in the
loss, such tokens only dilute the decision's gradient by the reply's length and push the model's
unrestricted probabilities of the shared spelling up and down at random.

Sequences are right-padded into ``[N, L]`` tensors. Per-token tensors are aligned with
``input_ids``: position ``t`` holds the quantity of token ``t`` (predicted from the tokens
before it), so position 0 and every prompt and padding position are masked out.

Episodes that cannot be trained on are left out and counted: unscored episodes (ended by an
infrastructure failure), episodes without turns, and turns that carry no token ids, no
log-probs, no prompt ids or an empty completion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envgym.errors import ConfigError
from envgym.rollout.records import Trajectory, Turn

__all__ = ["Collected", "TrainBatch", "TurnSample", "build_batch", "collect", "policy_logprobs"]


@dataclass(slots=True)
class TurnSample:
    """One agent turn ready to train on.

    Attributes:
        episode: index of the episode in :attr:`Collected.trajectories`.
        turn: the turn's index within its episode.
        group: the episode's group key (episodes of one group share a task seed).
        prompt_ids: the prompt token ids as fed to the model.
        completion_ids: the sampled completion token ids.
        logprobs: the recorded log-probability of each completion token (see the module docstring).
        reward: the turn's scalar reward.
        logprobs_match: whether ``logprobs`` are the policy's at the training temperature; when
            ``False`` they are a placeholder the trainer replaces by recomputed ones.
        forced: completion positions that carry no loss (the forced tokens of a restricted reply).
    """

    episode: int
    turn: int
    group: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    reward: float
    logprobs_match: bool = True
    forced: tuple[int, ...] = ()

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


@dataclass
class Collected:
    """The trainable part of a set of trajectories.

    Attributes:
        trajectories: the episodes kept (scored, with at least one trainable turn), in order.
        samples: every trainable turn of those episodes, episode by episode, turn by turn.
        turn_index: per kept episode, the position in ``samples`` of each of its turns
            (``None`` for a turn left out).
        excluded_episodes: episodes left out (unscored, no turns, or no trainable turn).
        excluded_turns: turns left out of kept episodes (no token ids, log-probs or prompt ids,
            or an empty completion).
    """

    trajectories: list[Trajectory] = field(default_factory=list)
    samples: list[TurnSample] = field(default_factory=list)
    turn_index: list[list[int | None]] = field(default_factory=list)
    excluded_episodes: int = 0
    excluded_turns: int = 0


def _trainable(turn: Turn) -> bool:
    ids, logprobs, prompt = turn.token_ids, turn.logprobs, turn.prompt_token_ids
    return bool(ids) and bool(prompt) and logprobs is not None and len(logprobs) == len(ids)


def policy_logprobs(turn: Turn, temperature: float = 1.0) -> list[float] | None:
    """The recorded log-probs of ``turn``'s completion under the untruncated policy at
    ``temperature`` (``log_softmax(logits / temperature)``), or ``None`` when the record has none.

    At temperature 1 that is ``Turn.logprobs``; otherwise ``extra["sampling_logprobs"]`` when
    ``extra["sampling"]`` says they were drawn at this temperature without top-p / top-k truncation.
    """
    if turn.logprobs is None:
        return None
    if temperature == 1.0:
        return [float(lp) for lp in turn.logprobs]
    extra = turn.extra if isinstance(turn.extra, dict) else {}
    sampling, values = extra.get("sampling"), extra.get("sampling_logprobs")
    if not isinstance(sampling, dict) or not isinstance(values, list) or len(values) != len(turn.logprobs):
        return None
    used = sampling.get("temperature")
    if not isinstance(used, (int, float)) or not math.isclose(float(used), temperature, rel_tol=1e-9, abs_tol=0.0):
        return None
    if float(sampling.get("top_p", 1.0) or 1.0) < 1.0 or int(sampling.get("top_k", 0) or 0) > 0:
        return None
    if sampling.get("restricted"):  # drawn among some tokens only (choices="admissible"): not the policy's
        return None
    return [float(lp) for lp in values]


def _forced(turn: Turn) -> tuple[int, ...]:
    """The completion positions of a restricted reply that had no alternative (see the module docstring)."""
    extra = turn.extra if isinstance(turn.extra, dict) else {}
    sampling, forced = extra.get("sampling"), extra.get("forced_tokens")
    if not isinstance(sampling, dict) or not sampling.get("restricted") or not isinstance(forced, list):
        return ()
    n = len(turn.token_ids or ())
    return tuple(sorted({int(i) for i in forced if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n}))


def collect(trajectories: Sequence[Trajectory], *, group_key: Any = None, temperature: float = 1.0) -> Collected:
    """Keep the trainable episodes and turns of ``trajectories`` (see the module docstring).

    Args:
        trajectories: recorded episodes.
        group_key: ``f(trajectory) -> int`` giving each episode's group; default its ``group``.
        temperature: the sampling temperature of the policy being trained: it picks which recorded
            log-probs are the old ones (:func:`policy_logprobs`).
    """
    out = Collected()
    key = group_key or (lambda t: t.group)
    for traj in trajectories:
        if not traj.scored or not traj.turns or not any(_trainable(t) for t in traj.turns):
            out.excluded_episodes += 1
            continue
        episode = len(out.trajectories)
        out.trajectories.append(traj)
        positions: list[int | None] = []
        for turn in traj.turns:
            if not _trainable(turn):
                out.excluded_turns += 1
                positions.append(None)
                continue
            positions.append(len(out.samples))
            old = policy_logprobs(turn, temperature)
            out.samples.append(
                TurnSample(
                    episode=episode,
                    turn=turn.index,
                    group=int(key(traj)),
                    prompt_ids=[int(i) for i in turn.prompt_token_ids or ()],
                    completion_ids=[int(i) for i in turn.token_ids or ()],
                    logprobs=old if old is not None else [float(lp) for lp in turn.logprobs or ()],
                    reward=float(turn.reward),
                    logprobs_match=old is not None,
                    forced=_forced(turn),
                )
            )
        out.turn_index.append(positions)
    return out


@dataclass
class TrainBatch:
    """Right-padded training tensors (``N`` sequences of at most ``L`` tokens).

    Attributes:
        input_ids: ``[N, L]`` prompt + completion ids, right-padded with the pad id.
        attention_mask: ``[N, L]`` 1 on real tokens, 0 on padding.
        loss_mask: ``[N, L]`` float, 1 on completion tokens only (not on forced ones).
        old_logprobs: ``[N, L]`` recorded log-probs at completion positions, 0 elsewhere.
        advantages: ``[N, L]`` each turn's advantage at its completion positions, 0 elsewhere.
        value_index: ``[N]`` position of each sequence's last prompt token (where PPO's value
            head reads the state).
        returns: ``[N]`` value targets (PPO), or ``None``.
        old_values: ``[N]`` value estimates made before the update (PPO), or ``None``.
        ref_logprobs: ``[N, L]`` reference-model log-probs (KL penalty), or ``None``.
        rows: the :class:`TurnSample` of each sequence.
    """

    input_ids: Any
    attention_mask: Any
    loss_mask: Any
    old_logprobs: Any
    advantages: Any
    value_index: Any
    returns: Any = None
    old_values: Any = None
    ref_logprobs: Any = None
    rows: list[TurnSample] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def tokens(self) -> int:
        """Completion tokens (the ones that carry loss)."""
        return int(self.loss_mask.sum().item())

    def select(self, index: Sequence[int] | Any) -> TrainBatch:
        """The sequences ``index`` (a list or a long tensor), trimmed to their longest length."""
        import torch

        idx = index if isinstance(index, torch.Tensor) else torch.as_tensor(list(index), dtype=torch.long)
        idx = idx.to(self.input_ids.device)
        width = int(self.attention_mask[idx].sum(dim=1).max().item()) if len(idx) else 0

        def pick(t: Any, per_token: bool) -> Any:
            if t is None:
                return None
            rows = t[idx]
            return rows[:, :width] if per_token else rows

        ids = [int(i) for i in idx.tolist()]
        return TrainBatch(
            input_ids=pick(self.input_ids, True),
            attention_mask=pick(self.attention_mask, True),
            loss_mask=pick(self.loss_mask, True),
            old_logprobs=pick(self.old_logprobs, True),
            advantages=pick(self.advantages, True),
            value_index=pick(self.value_index, False),
            returns=pick(self.returns, False),
            old_values=pick(self.old_values, False),
            ref_logprobs=pick(self.ref_logprobs, True),
            rows=[self.rows[i] for i in ids] if self.rows else [],
        )

    def split(self, size: int) -> list[TrainBatch]:
        """Consecutive micro-batches of at most ``size`` sequences, each trimmed of extra padding."""
        return [self.select(range(start, min(start + size, len(self)))) for start in range(0, len(self), size)]

    def length_order(self) -> Any:
        """The sequence indices from shortest to longest (ties in batch order)."""
        import torch

        return torch.argsort(self.attention_mask.sum(dim=1), stable=True)

    def split_by_length(self, size: int) -> list[TrainBatch]:
        """Micro-batches of at most ``size`` sequences of similar lengths (the order of
        :meth:`length_order`), each trimmed of extra padding.

        A batch mixing short and long prompts (an episode's first observation is often several
        times longer than the later ones) pads every consecutive micro-batch to its longest
        sequence; sorting first pads each to a near neighbour instead. The rows of a step are the
        same either way, so is its loss.
        """
        return self.split_in_order(self.length_order(), size)

    def prompt_order(self) -> Any:
        """The sequence indices with the rows of one prompt next to each other: prompts from
        shortest to longest (ties in order of their first row), each prompt's rows from shortest to
        longest (ties in batch order). A row's prompt is its first ``value_index + 1`` tokens.
        """
        import torch

        lengths = [int(v) for v in self.attention_mask.sum(dim=1).tolist()]
        prompts = [int(v) + 1 for v in self.value_index.tolist()]
        first: dict[tuple[int, ...], int] = {}
        owner = [first.setdefault(tuple(self.input_ids[row, :p].tolist()), row) for row, p in enumerate(prompts)]
        order = sorted(range(len(self)), key=lambda row: (prompts[row], owner[row], lengths[row], row))
        return torch.tensor(order, dtype=torch.long)

    def split_by_prompt(self, size: int) -> list[TrainBatch]:
        """Micro-batches of at most ``size`` sequences in :meth:`prompt_order`, each trimmed of extra
        padding.

        For a policy that forwards a shared prompt once (:mod:`envgym.trainer.packing`): sorted by
        length alone, the members of a GRPO group (one prompt, replies of different lengths) scatter
        over micro-batches among other groups of similar lengths, and little is shared; kept
        together, a micro-batch of whole groups forwards each of its prompts once. The rows of a
        step are the same either way, so is its loss.
        """
        return self.split_in_order(self.prompt_order(), size)

    def split_in_order(self, order: Any, size: int) -> list[TrainBatch]:
        """Consecutive micro-batches of at most ``size`` of the sequences ``order`` (a long tensor)."""
        return [self.select(order[start : start + size]) for start in range(0, len(order), size)]

    def to(self, device: Any) -> TrainBatch:
        moved = {
            name: (value.to(device) if value is not None else None)
            for name, value in (
                ("input_ids", self.input_ids),
                ("attention_mask", self.attention_mask),
                ("loss_mask", self.loss_mask),
                ("old_logprobs", self.old_logprobs),
                ("advantages", self.advantages),
                ("value_index", self.value_index),
                ("returns", self.returns),
                ("old_values", self.old_values),
                ("ref_logprobs", self.ref_logprobs),
            )
        }
        return TrainBatch(**moved, rows=self.rows)


def build_batch(
    samples: Sequence[TurnSample],
    advantages: Sequence[float] | Sequence[Sequence[float]],
    *,
    pad_id: int,
    returns: Sequence[float] | None = None,
    old_values: Sequence[float] | None = None,
) -> TrainBatch:
    """Pad ``samples`` into a :class:`TrainBatch`.

    Args:
        samples: the turns to train on.
        advantages: one advantage per sample (broadcast to its completion tokens), or one list
            of per-token advantages per sample (same length as its completion).
        pad_id: the id written at padding positions (never trained on).
        returns: PPO value targets, one per sample.
        old_values: PPO values before the update, one per sample.
    """
    import torch

    if not samples:
        raise ConfigError("no trainable turns: every episode was unscored or its turns carried no token ids.")
    if len(advantages) != len(samples):
        raise ConfigError(f"expected one advantage per sample ({len(samples)}), got {len(advantages)}.")
    n = len(samples)
    width = max(s.length for s in samples)
    input_ids = torch.full((n, width), int(pad_id), dtype=torch.long)
    attention_mask = torch.zeros((n, width), dtype=torch.long)
    loss_mask = torch.zeros((n, width), dtype=torch.float32)
    old_logprobs = torch.zeros((n, width), dtype=torch.float32)
    adv = torch.zeros((n, width), dtype=torch.float32)
    value_index = torch.zeros(n, dtype=torch.long)
    for row, (sample, advantage) in enumerate(zip(samples, advantages, strict=True)):
        p, c = len(sample.prompt_ids), len(sample.completion_ids)
        input_ids[row, : p + c] = torch.tensor(sample.prompt_ids + sample.completion_ids, dtype=torch.long)
        attention_mask[row, : p + c] = 1
        loss_mask[row, p : p + c] = 1.0
        for i in sample.forced:
            loss_mask[row, p + i] = 0.0
        old_logprobs[row, p : p + c] = torch.tensor(sample.logprobs, dtype=torch.float32)
        if isinstance(advantage, Sequence):
            if len(advantage) != c:
                raise ConfigError(
                    f"per-token advantages of sample {row} have {len(advantage)} entries for {c} completion tokens."
                )
            adv[row, p : p + c] = torch.tensor([float(a) for a in advantage], dtype=torch.float32)
        else:
            adv[row, p : p + c] = float(advantage)
        value_index[row] = p - 1
    batch = TrainBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        loss_mask=loss_mask,
        old_logprobs=old_logprobs,
        advantages=adv,
        value_index=value_index,
        rows=list(samples),
    )
    if returns is not None:
        batch.returns = torch.tensor([float(r) for r in returns], dtype=torch.float32)
    if old_values is not None:
        batch.old_values = torch.tensor([float(v) for v in old_values], dtype=torch.float32)
    return batch
