"""Prompt-shared forward passes: a prompt that several sequences of a micro-batch share is run once.

A GRPO group is one task with ``G`` sampled replies: its ``G`` training sequences start with the
same prompt token ids. Padded one sequence per row (:class:`~envgym.trainer.batch.TrainBatch`),
the loss forward runs that prompt ``G`` times, with gradients. Packed, it runs once:

* the rows of a micro-batch whose prompts are equal (token for token) form a **pack**: one row
  holding the prompt, then each member's completion after it
  (``prompt | completion_1 | completion_2 | ...``);
* a completion's tokens take the position ids they have in their own sequence (``p, p+1, ...``
  after a prompt of ``p`` tokens), and a block mask lets each token see the prompt and the tokens
  of its own completion before it, never another member's: every token sees exactly the keys
  and positions it sees in its own padded row, so its hidden state is the same function of the
  weights, and the log-probs, the values and the gradients (the prompt's activations collect the
  gradient of every member) are those of the per-row forward up to float rounding;
* the hidden states are then gathered back into the per-row order the loss expects
  (:attr:`PromptPacks.predict_source`), so nothing after the backbone changes.

Which micro-batches share: any whose rows repeat a prompt -- single-turn GRPO / RLOO / Dr.GRPO
groups, the first turn of every multi-turn episode of a group (same task seed, same first
observation), PPO's value head too (a turn's value is read at its last prompt token, which the
pack holds). A micro-batch whose prompts all differ (later turns of multi-turn episodes, whose
histories differ), or whose packs would cost more than the padded rows
(:func:`plan_prompt_packs`), keeps the per-row forward. So does a model whose attention cannot
take a custom mask (only ``sdpa`` and ``eager`` can; flash-attention kernels take none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["MASKED_ATTENTION", "PromptPacks", "attention_span", "plan_prompt_packs", "shares_prompts"]

#: Attention implementations that take an explicit ``[batch, 1, query, key]`` mask.
MASKED_ATTENTION = ("sdpa", "eager")


@dataclass
class PromptPacks:
    """A micro-batch packed prompt-first (see the module docstring): ``B`` packs of ``T`` tokens.

    Attributes:
        input_ids: ``[B, T]`` each pack's prompt then its members' completions, right-padded.
        position_ids: ``[B, T]`` every token's position in its own sequence (0 on padding).
        allowed: ``[B, T, T]`` bool, ``allowed[b, q, k]``: query ``q`` of pack ``b`` sees key ``k``
            (a padding position sees itself only, so no softmax row is empty).
        predict_source: ``[K]`` for each predicted token, in the order of the per-row forward's
            ``hidden[:, :-1][predict]``, the flat index (``b * T + t``) of the hidden state that
            predicts it.
        value_source: ``[N]`` the flat index of each row's last prompt token.
        rows: the micro-batch's sequences (``N``).
    """

    input_ids: Any
    position_ids: Any
    allowed: Any
    predict_source: Any
    value_source: Any
    rows: int

    @property
    def packs(self) -> int:
        return int(self.input_ids.shape[0])

    def attention_mask(self, dtype: Any, implementation: str) -> Any:
        """The 4-D mask transformers takes as is: boolean for ``sdpa`` (True: attend), additive
        (0 or the dtype's lowest value) for ``eager``."""
        import torch

        allowed = self.allowed[:, None]
        if implementation == "sdpa":
            return allowed
        additive = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
        return additive.masked_fill(~allowed, torch.finfo(dtype).min)

    def to(self, device: Any) -> PromptPacks:
        return PromptPacks(
            input_ids=self.input_ids.to(device),
            position_ids=self.position_ids.to(device),
            allowed=self.allowed.to(device),
            predict_source=self.predict_source.to(device),
            value_source=self.value_source.to(device),
            rows=self.rows,
        )


def shares_prompts(model: Any) -> bool:
    """Whether ``model``'s attention takes the pack's block mask (``sdpa`` or ``eager``)."""
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) in MASKED_ATTENTION


def attention_span(model: Any) -> float:
    """The context length at which a token's attention costs as much as its matrix products.

    Per token the weight matrices cost about ``2 x parameters`` FLOPs (the embedding table is a
    lookup and the output layer runs at predicted positions only, the same in both layouts);
    per (query, key) pair the attention scores and the weighted sum cost ``4 x hidden`` per layer.
    The span is the ratio of the two.
    """
    config = model.config
    hidden, layers = int(config.hidden_size), int(config.num_hidden_layers)
    embeddings = {
        id(p)
        for module in (model.get_input_embeddings(), model.get_output_embeddings())
        if module is not None
        for p in module.parameters()
    }
    weights = sum(p.numel() for p in model.parameters() if id(p) not in embeddings)
    return max(weights / (2.0 * hidden * layers), 1.0)


def _cost(rows: int, width: int, span: float) -> float:
    """Relative cost of a forward over ``rows`` rows of ``width`` tokens (matrix products plus attention)."""
    return rows * width * (1.0 + width / span)


def plan_prompt_packs(batch: Any, *, span: float = math.inf) -> PromptPacks | None:
    """The packs of ``batch`` (a :class:`~envgym.trainer.batch.TrainBatch`), or ``None`` when the
    per-row forward is the one to run: no two rows share a prompt, or the packs would cost no less
    (:func:`_cost` with the model's :func:`attention_span`: a pack's attention grows with the square
    of its width, so a large group of long replies may be cheaper padded row by row).

    A row's prompt is its first ``value_index + 1`` tokens (where the batch reads its state); its
    completion runs to the end of its attention mask. Packs come in the order of their first row,
    members in batch order.
    """
    import torch

    ids = batch.input_ids.detach().cpu()
    n, width = ids.shape
    if n < 2:
        return None
    lengths = [int(v) for v in batch.attention_mask.detach().cpu().sum(dim=1).tolist()]
    prompts = [int(v) + 1 for v in batch.value_index.detach().cpu().tolist()]
    if any(not 1 <= p <= length for p, length in zip(prompts, lengths, strict=True)):
        return None  # not a prompt + completion batch: nothing to share safely
    groups: dict[tuple[int, ...], list[int]] = {}
    for row in range(n):
        groups.setdefault(tuple(ids[row, : prompts[row]].tolist()), []).append(row)
    if len(groups) == n:
        return None
    members = list(groups.values())
    widths = [prompts[rows[0]] + sum(lengths[r] - prompts[r] for r in rows) for rows in members]
    packed_width = max(widths)
    if _cost(len(members), packed_width, span) >= _cost(n, max(lengths), span):
        return None

    b = len(members)
    input_ids = torch.zeros((b, packed_width), dtype=torch.long)
    position_ids = torch.zeros((b, packed_width), dtype=torch.long)
    allowed = torch.zeros((b, packed_width, packed_width), dtype=torch.bool)
    causal = torch.ones((packed_width, packed_width), dtype=torch.bool).tril()
    where = torch.zeros((n, width), dtype=torch.long)  # flat pack index of each (row, position)
    value_source = torch.zeros(n, dtype=torch.long)
    for pack, rows in enumerate(members):
        p = prompts[rows[0]]
        base = pack * packed_width
        input_ids[pack, :p] = ids[rows[0], :p]
        position_ids[pack, :p] = torch.arange(p)
        allowed[pack, :p, :p] = causal[:p, :p]
        offset = p
        for row in rows:
            c = lengths[row] - p
            end = offset + c
            input_ids[pack, offset:end] = ids[row, p : lengths[row]]
            position_ids[pack, offset:end] = torch.arange(p, lengths[row])
            allowed[pack, offset:end, :p] = True
            allowed[pack, offset:end, offset:end] = causal[:c, :c]
            where[row, :p] = base + torch.arange(p)
            where[row, p : lengths[row]] = base + torch.arange(offset, end)
            value_source[row] = base + p - 1
            offset = end
        pad = torch.arange(offset, packed_width)
        allowed[pack, pad, pad] = True
    predict = batch.loss_mask[:, 1:].detach().cpu() > 0
    return PromptPacks(
        input_ids=input_ids,
        position_ids=position_ids,
        allowed=allowed,
        predict_source=where[:, :-1][predict],
        value_source=value_source,
        rows=n,
    )
