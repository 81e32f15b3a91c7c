"""``HFAgent``: a local transformers causal LM (default: the bundled SmolLM2-135M-Instruct) as a chat agent.

The agent applies the model's chat template to each episode's messages and samples replies with
its own decoding loop (KV cache, left padding), not ``model.generate``, for three reasons the
trainer relies on:

* **Per-episode randomness.** Every random number is counter-based (:mod:`envgym.agents.sampling`):
  a function of (agent seed, episode seed, group member, turn), the decoding step and the
  vocabulary index, computed on the model's device. An episode's reply does not depend on which
  other episodes share the batch, their order or the micro-batch size, up to float rounding in
  batched matrix products (about 1e-5 in a log-prob), which can change a token only when two
  candidates are that close (see :func:`sample_next_tokens`).
* **Exact records.** ``token_ids`` are the sampled ids (including the final stop token when one
  was sampled), ``prompt_token_ids`` the prompt ids as fed (no padding), and ``text`` is
  ``decode(token_ids)``.
* **Stop strings.** An input's ``stop`` strings (``</action>`` from the harness) end its row as
  soon as the decoded completion contains one: after each sampled token the last few ids of the
  row (enough to spell the longest stop string) are decoded and searched. The row keeps every id
  up to and including the one that completed the stop string, so the text keeps the stop string
  (and whatever else that last token spells) and the ids stay exactly what was sampled.
* **Two log-probs per token.** ``AgentOutput.logprobs`` holds the *model* log-probability of each
  sampled token: ``log_softmax(logits)`` at temperature 1 with no top-k/top-p truncation -- what
  a trainer recomputes with one teacher-forced forward pass over prompt + completion.
  ``AgentOutput.extra["sampling_logprobs"]`` holds the log-probability under the distribution the
  token was actually drawn from: ``log_softmax(logits / temperature)``, restricted to the top-k /
  top-p set and renormalised when those are on (without truncation it too is recomputable from
  the logits). Greedy decoding (temperature 0) draws from a point mass, so those entries are 0.0.
  With temperature 1 and no truncation the two lists agree. ``extra["sampling"]`` records the
  temperature, top_k and top_p used.

Prefill, the bulk of a call's time on a CPU, is kept small: prompts of similar length prefill
together and their caches are stacked for one decoding batch (:meth:`HFAgent._prefill`), and the
system turn that starts every prompt of an episode is prefilled once and its KV reused
(``prefix_cache``, :meth:`HFAgent._bucketed_prefill`).

**Replies among the admissible actions** (``choices="admissible"``). When an input's
``info["admissible_actions"]`` lists the valid actions, the reply is decoded within them: at each
step only tokens that continue one of the actions' token sequences can be drawn (the
renormalised model distribution over them), and the reply ends once it spells a whole action
that no other action extends (where one does, the end-of-turn token competes with the longer
ones). The model still scores every choice, so the policy is the model's own preference among
the valid actions (the action-scoring policies of SayCan and GLAM, drawn token by token);
``logprobs`` stay the full-vocabulary ones a trainer recomputes and ``sampling_logprobs`` are
those of the restricted draw; ``extra["forced_tokens"]`` lists the reply's positions where one
token was the only continuation (``click(`` of ``click(3)`` among ``click(1)`` ... ``click(9)``):
they carry no decision, and the trainer leaves them out of the loss. Actions are tokenised on
their own, as the first words of the reply, and wrapped in ``<action>...</action>`` when the
input's stop strings hold ``</action>`` (the harness's action tags). Inputs without an action list (open action sets)
decode freely.

Sampling uses the exponential race (Gumbel-max trick): see :func:`sample_next_tokens`. The
noise bits are the same on a CPU and a GPU for the same seeds (integer hashing); the logits are
not bit-identical across devices, so replies agree except where two candidates nearly tie.
Sampled ids and log-probs stay on the device until a call's decoding ends; each step brings
back one small code per live row (stop token, length, or "the host must look": a token that
could complete a stop string, or a reply walking the admissible-action trie).

Runs recorded before the counter-based noise (envgym <= issue 35) drew from per-row
``torch.Generator`` streams: the same seeds now sample different replies. Recorded runs and
leaderboard bundles still verify, since verification replays the recorded actions.
"""

from __future__ import annotations

import collections
import hashlib
import inspect
import logging
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envgym.agents.sampling import sample_next_tokens

from envgym.errors import ConfigError, EnvgymError, MissingDependencyError
from envgym.models import adapter_agent_options, load_causal_lm, load_tokenizer
from envgym.rollout.agent import Agent, AgentInput, AgentOutput
from envgym.rollout.lm import chat_prompt_ids, chat_system_text, stop_strings, stop_token_ids, turn_seed

__all__ = ["HFAgent", "sample_next_tokens", "threads_for_load"]

logger = logging.getLogger(__name__)


@dataclass
class _Row:
    """One episode's generation state inside a micro-batch."""

    prompt: list[int]
    limit: int
    key: int  # the 63-bit counter key of this episode's turn (see envgym.agents.sampling)
    tokens: list[int]
    logprobs: list[float]
    sampling_logprobs: list[float]
    finish_reason: str | None = None
    length: int = 0  # the reply's length once finished
    stop: tuple[str, ...] = ()
    stop_window: int = 0
    stop_string: str | None = None
    prefix: int = 0  # leading prompt ids whose KV is cached (the system turn, or see `reuse`)
    episode: str = ""
    reuse: Any = None  # the episode's last sequence's KV per layer, when it holds more than the system turn
    choices: tuple[tuple[int, ...], ...] | None = None  # token ids of the admissible replies

    def _next(self) -> tuple[bool, set[int]]:
        """Whether the reply so far spells a whole choice, and the tokens that continue a longer one."""
        assert self.choices is not None
        return _continuations(self.choices, self.tokens)

    def allowed(self, end_ids: Any) -> list[int] | None:
        """Token ids that may come next under ``choices`` (``None``: any token)."""
        if self.choices is None:
            return None
        whole, longer = self._next()
        if whole and longer and end_ids:
            longer.add(min(end_ids))  # end here, or go on to a longer action
        return sorted(longer) or None

    def chose(self) -> bool:
        """Whether the reply spells a whole choice that no other choice extends."""
        if self.choices is None:
            return False
        whole, longer = self._next()
        return whole and not longer


def _continuations(choices: Sequence[tuple[int, ...]], done: Sequence[int]) -> tuple[bool, set[int]]:
    """Whether ``done`` spells a whole choice, and the tokens that continue it to a longer one."""
    n, done = len(done), tuple(done)
    return done in choices, {c[n] for c in choices if len(c) > n and c[:n] == done}


def forced_positions(choices: Sequence[tuple[int, ...]], tokens: Sequence[int]) -> list[int]:
    """The positions of ``tokens`` (a reply decoded within ``choices``) where nothing else could
    be drawn: one token continued the choices and the reply could not end there. The policy that
    drew the reply gave those tokens probability 1; only the other positions hold its decisions."""
    out = []
    for i in range(len(tokens)):
        whole, longer = _continuations(choices, tokens[:i])
        if len(longer) == 1 and not whole:
            out.append(i)
    return out


def _select_cache_rows(cache: Any, index: Any) -> None:
    """Keep only the batch lines ``index`` of a transformers KV cache, in place."""
    if hasattr(cache, "reorder_cache"):  # transformers Cache objects (beam search uses it the same way)
        cache.reorder_cache(index)
    else:  # pragma: no cover - older caches
        cache.batch_select_indices(index)


class HFAgent(Agent):
    """A transformers causal LM answering chat messages (``chat = True``), batched, seeded per episode.

    Args:
        model: model alias (``"smollm2"``) or local transformers folder; see
            :func:`envgym.models.resolve_model`. Ignored for the weights when ``model_obj`` is given
            (the tokenizer is still loaded from it when ``tokenizer`` is ``None``).
        device: where to run; ``None``: CUDA when available, else CPU. Ignored with ``model_obj``
            (a live model stays where it is).
        dtype: weight dtype; ``None``: bfloat16 on CUDA, float32 on CPU. Ignored with ``model_obj``.
        temperature: softmax temperature; 0 means greedy (argmax) decoding.
        top_p: nucleus sampling mass in (0, 1]; 1 keeps every token.
        top_k: keep only the ``k`` most likely tokens; 0 keeps every token.
        max_new_tokens: the most tokens per reply (an input's own ``max_new_tokens`` lowers it).
        seed: agent seed, mixed into every episode's generator seed.
        batch_size: most episodes decoded together (larger batches are split into micro-batches); their
            prompts run their prefill in buckets of similar length (see :meth:`_prefill`).
        model_obj: a live ``transformers`` causal LM to use instead of loading ``model`` (the
            trainer passes its policy). Its train/eval mode is restored after each ``act``.
        tokenizer: the tokenizer that goes with ``model_obj``.
        ignore_eos: keep generating past stop tokens and stop strings until the token limit (for
            throughput benchmarks only: replies then always end with ``finish_reason="length"``).
        choices: ``"free"``: any reply; ``"admissible"``: replies are decoded within the input's
            ``info["admissible_actions"]`` when it lists them (see the module docstring). ``None``
            (default): what a LoRA adapter in ``model`` was trained with (its
            ``envgym-adapter.json`` or run config), else ``"free"``.
        name: shown in reports; default ``"hf:<model>"``.
        prefix_cache: how many system turns to keep the KV cache of (0: none). A chat prompt
            whose first message is a system message starts with that message's tokens every turn
            of its episode; their keys and values are computed once and reused (about a fifth of
            a ``core-v1`` prompt). Replies are the same as without it up to float rounding. The
            cached keys and values belong to the weights that computed them: after changing the
            weights of a live ``model_obj``, call :meth:`reset` (the runner calls it at the start
            of every run; the trainer builds a new agent for every rollout).
        threads: torch threads for each call on a CPU. ``None`` (default): chosen at each call
            from the load average (:func:`threads_for_load`; at most torch's thread count when
            the agent was built), unless ``OMP_NUM_THREADS`` is set, which is then left alone.
            Torch's setting is restored after every call.
    """

    chat = True

    def __init__(
        self,
        model: str | os.PathLike[str] = "smollm2",
        *,
        device: Any = None,
        dtype: Any = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 128,
        seed: int = 0,
        batch_size: int = 64,
        model_obj: Any = None,
        tokenizer: Any = None,
        ignore_eos: bool = False,
        name: str | None = None,
        prefix_cache: int = 256,
        choices: str | None = None,
        threads: int | None = None,
    ) -> None:
        checks = [
            ("temperature", temperature, isinstance(temperature, int | float) and temperature >= 0, "a number >= 0"),
            ("top_p", top_p, isinstance(top_p, int | float) and 0 < top_p <= 1, "a number in (0, 1]"),
            ("top_k", top_k, isinstance(top_k, int) and top_k >= 0, "an int >= 0"),
            ("max_new_tokens", max_new_tokens, isinstance(max_new_tokens, int) and max_new_tokens >= 1, "an int >= 1"),
            ("batch_size", batch_size, isinstance(batch_size, int) and batch_size >= 1, "an int >= 1"),
            ("prefix_cache", prefix_cache, isinstance(prefix_cache, int) and prefix_cache >= 0, "an int >= 0"),
            ("seed", seed, isinstance(seed, int), "an int"),
            ("threads", threads, threads is None or (isinstance(threads, int) and threads >= 1), "None or an int >= 1"),
            ("choices", choices, choices is None or choices in CHOICES, f"one of {', '.join(map(repr, CHOICES))}"),
        ]
        for arg, value, ok, expected in checks:
            if not ok or isinstance(value, bool):
                raise ConfigError(f"HFAgent {arg} must be {expected}, got {value!r}.")
        try:
            import torch
        except ImportError as err:
            raise MissingDependencyError("torch", "llm", "HFAgent") from err

        self.model_spec = os.fspath(model)
        self.name = name or f"hf:{self.model_spec}"
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = top_k
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.batch_size = batch_size
        self.ignore_eos = ignore_eos
        self.prefix_cache = prefix_cache
        # Torch threads per call on a CPU: fixed (an explicit argument or OMP_NUM_THREADS), or
        # chosen from the load at each call, at most what torch had when the agent was built.
        self.threads = threads
        self._most_threads = torch.get_num_threads()
        self._auto_threads = threads is None and not os.environ.get("OMP_NUM_THREADS")
        self._last_threads = 0  # threads of the previous call (its share of the load average)
        if choices is None:
            choices = adapter_agent_options(self.model_spec).get("choices", "free") if model_obj is None else "free"
            if choices not in CHOICES:
                choices = "free"
        self.choices = choices
        self._choice_ids: dict[str, tuple[int, ...]] = {}  # action text -> its token ids
        # System-turn token ids -> that prefix's KV per layer ((keys, values), batch 1), most
        # recently used last. See _bucketed_prefill.
        self._prefixes: collections.OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = collections.OrderedDict()
        # Episode id -> (its last call's prompt + reply ids, their KV per layer), most recently
        # used last, at most EPISODE_KV_POSITIONS positions in all. See _reuse_episode.
        self._episode_kv: collections.OrderedDict[str, tuple[tuple[int, ...], list[tuple[Any, Any]]]] = (
            collections.OrderedDict()
        )
        self._splittable = True  # turned off for good when the model's cache cannot be taken apart
        self._sampling = {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}
        if model_obj is None:
            self.model, loaded_tokenizer = load_causal_lm(self.model_spec, device=device, dtype=dtype)
            self.tokenizer = tokenizer if tokenizer is not None else loaded_tokenizer
        else:
            self.model = model_obj
            self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(self.model_spec)
        self.device = next(self.model.parameters()).device
        self._torch = torch
        self._episodes: dict[str, tuple[int | None, int]] = {}
        self.stop_token_ids = stop_token_ids(self.model, self.tokenizer)
        pad = self.tokenizer.pad_token_id
        self._pad_id = pad if pad is not None else min(self.stop_token_ids or {0})
        self._max_positions = getattr(self.model.config, "max_position_embeddings", None)
        forward = inspect.signature(self.model.forward).parameters
        self._logits_to_keep = "logits_to_keep" in forward
        # transformers >= 5.24 names the KV cache argument (and output) ``cache``; older releases
        # ``past_key_values`` (now deprecated, with a FutureWarning per call).
        self._cache_name = "cache" if "cache" in forward else "past_key_values"
        self._stop_masks: dict[tuple[tuple[str, ...], int], Any] = {}
        self._closed = False

    # ------------------------------------------------------------------ episode bookkeeping
    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        self._episodes[episode_id] = (seed, member)

    def end_episode(self, episode_id: str) -> None:
        self._episodes.pop(episode_id, None)
        self._episode_kv.pop(episode_id, None)

    def reset(self) -> None:
        self._episodes.clear()
        self._prefixes.clear()
        self._episode_kv.clear()

    def close(self) -> None:
        """Drop the model and tokenizer (frees their memory once nothing else holds them)."""
        if self._closed:
            return
        self._closed = True
        self.model = None
        self.tokenizer = None
        self._episodes.clear()
        self._prefixes.clear()
        self._episode_kv.clear()

    def _key(self, item: AgentInput) -> int:
        """The episode's sampling key for this turn: same episode, seed, member and turn -> same draws
        (:func:`envgym.rollout.lm.turn_seed`; an episode never started is keyed from its id)."""
        return turn_seed(self.seed, item, self._episodes.get(item.episode_id))

    # ------------------------------------------------------------------ prompting
    def prompt_ids(self, item: AgentInput) -> list[int]:
        """The prompt token ids for ``item``: its messages (or its observation as one user message)
        through the tokenizer's chat template, with the assistant turn opened
        (:func:`envgym.rollout.lm.chat_prompt_ids`)."""
        return chat_prompt_ids(self.tokenizer, item)

    def _system_prefix(self, item: AgentInput, prompt: list[int]) -> int:
        """How many leading ids of ``prompt`` are the system turn alone (0: no reusable prefix).

        The system message rendered on its own by the chat template (with the env's tools, which
        the template writes into the system turn: :func:`envgym.rollout.lm.chat_system_text`) must
        spell exactly the first ids of the whole prompt (true of ChatML templates such as
        SmolLM2's, and of the tool template); anything else
        (no system message, a template that rewrites it, a prefix shorter than
        :data:`MIN_PREFIX`) gets no prefix and the prompt is prefilled whole."""
        text = chat_system_text(self.tokenizer, item) if self.prefix_cache and self._splittable else None
        if text is None:
            return 0
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) < MIN_PREFIX or len(ids) >= len(prompt) or prompt[: len(ids)] != list(ids):
            return 0
        return len(ids)

    def _reuse_episode(self, row: _Row) -> None:
        """Point ``row`` at its episode's cached KV when that covers more of its prompt than the
        system turn: the previous call's prompt and reply, as far as the new prompt repeats them
        token for token (all of it when the history grows by whole turns, as at the second turn
        of a ``last_k`` window; the system turn alone once the window slides). Keys and values
        of a prefix depend on that prefix only, so the reply is the same as without the cache,
        up to float rounding. One prompt id at least is left to prefill (for its logits)."""
        entry = self._episode_kv.get(row.episode) if self.prefix_cache and self._splittable else None
        if entry is None:
            return
        sequence, layers = entry
        common = 0
        for a, b in zip(sequence, row.prompt[:-1], strict=False):
            if a != b:
                break
            common += 1
        if common > row.prefix and common >= MIN_PREFIX:
            row.prefix, row.reuse = common, layers
            self._episode_kv.move_to_end(row.episode)

    def _keep_episode_kv(self, lines: list[int], cache: Any, attention_mask: Any) -> list[Any]:
        """The KV of batch ``lines`` of ``cache`` (rows just finished): each one's real positions
        (prompt and reply as fed so far), batch 1 per layer, for :meth:`_reuse_episode`."""
        layers = _cache_layers(cache) if self.prefix_cache and self._splittable else None
        if layers is None:
            return [None] * len(lines)
        kept = []
        for line in lines:
            real = attention_mask[line].nonzero().squeeze(-1)
            kept.append([(k[line : line + 1, :, real], v[line : line + 1, :, real]) for k, v in layers])
        return kept

    def _store_episode_kv(self, row: _Row, layers: Any, fed: int) -> None:
        """Keep ``layers`` (prompt + the first ``fed`` reply ids) as ``row``'s episode's last sequence."""
        if layers is None or not row.episode:
            return
        self._episode_kv.pop(row.episode, None)
        self._episode_kv[row.episode] = (tuple(row.prompt) + tuple(row.tokens[:fed]), layers)
        total = sum(len(seq) for seq, _ in self._episode_kv.values())
        while total > EPISODE_KV_POSITIONS and len(self._episode_kv) > 1:
            _, (seq, _) = self._episode_kv.popitem(last=False)
            total -= len(seq)

    # ------------------------------------------------------------------ acting
    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        """Reply to every episode in ``batch`` (one :class:`AgentOutput` each, in order)."""
        if self._closed:
            raise EnvgymError(f"{self.name} is closed; create a new HFAgent to act again.")
        if not batch:
            return []
        rows = []
        for item in batch:
            prompt = self.prompt_ids(item)
            limit = (
                self.max_new_tokens if item.max_new_tokens is None else min(self.max_new_tokens, item.max_new_tokens)
            )
            limit = max(0, limit)
            if self._max_positions is not None and len(prompt) + limit > self._max_positions:
                limit = max(0, self._max_positions - len(prompt))
                logger.warning(
                    "episode %s: the prompt has %d tokens, so only %d new tokens fit in the model's %d positions",
                    item.episode_id,
                    len(prompt),
                    limit,
                    self._max_positions,
                )
            stop = stop_strings(item)
            # A token spells at least one byte (special tokens decode to nothing and are rare
            # mid-reply), so the last len(bytes) ids hold any stop string just completed; the
            # margin covers a multi-byte character cut at the window's start.
            window = max((len(text.encode("utf-8")) for text in stop), default=0) + 4
            row = _Row(prompt, limit, self._key(item), [], [], [], stop=stop, stop_window=window)
            row.prefix = self._system_prefix(item, prompt)
            row.episode = item.episode_id
            self._reuse_episode(row)
            row.choices = self._choices(item, limit)
            rows.append(row)
        # Similar lengths share micro-batches (less padding); results do not depend on the grouping.
        order = sorted(range(len(rows)), key=lambda i: len(rows[i].prompt))
        pending = [i for i in order if rows[i].limit > 0]
        for i in order:
            if rows[i].limit == 0:
                rows[i].finish_reason = "length"
        model = self.model
        was_training = model.training
        model.eval()
        torch = self._torch
        previous_threads = torch.get_num_threads()
        threads = self._call_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            with torch.inference_mode():
                for start in range(0, len(pending), self.batch_size):
                    self._generate([rows[i] for i in pending[start : start + self.batch_size]])
        finally:
            if threads is not None:
                torch.set_num_threads(previous_threads)
            if was_training:
                model.train()
        return [self._output(row) for row in rows]

    def _call_threads(self) -> int | None:
        """Torch threads for this call (``None``: leave torch's setting alone).

        On a CPU, unless fixed, from the 1-minute load average at the call: see
        :func:`threads_for_load`. On a shared machine, threads that wait on each other's cores
        cost far more than they bring (a batch took 7x longer with 2 threads than with 1 on a
        2-core machine at load 6), and the load changes during a run."""
        if self.device.type != "cpu":
            return None
        if not self._auto_threads:
            return self.threads
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # pragma: no cover - platforms without a load average
            return None
        threads = threads_for_load(load, os.cpu_count() or 1, self._last_threads, self._most_threads)
        if threads != self._last_threads:
            logger.debug("load average %.2f: %d torch threads", load, threads)
        self._last_threads = threads
        return threads

    def _choices(self, item: AgentInput, limit: int) -> tuple[tuple[int, ...], ...] | None:
        """The token ids of the replies ``item`` may get under ``choices="admissible"``, or
        ``None`` (free decoding: the mode is off, the input lists no actions, or none fits in
        ``limit`` tokens)."""
        if self.choices != "admissible":
            return None
        actions = item.info.get("admissible_actions") if isinstance(item.info, dict) else None
        if not isinstance(actions, list | tuple) or not actions:
            return None
        tagged = "</action>" in item.stop
        out: dict[tuple[int, ...], None] = {}
        for action in actions:
            text = f"<action>{action}</action>" if tagged else str(action)
            ids = self._choice_ids.get(text)
            if ids is None:
                ids = tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])
                self._choice_ids[text] = ids
            if 0 < len(ids) <= limit:
                out[ids] = None
        return tuple(out) or None

    def _output(self, row: _Row) -> AgentOutput:
        text = self.tokenizer.decode(row.tokens, skip_special_tokens=True)
        sampling = dict(self._sampling)
        extra: dict[str, Any] = {"sampling_logprobs": list(row.sampling_logprobs), "sampling": sampling}
        if row.choices is not None:
            sampling["restricted"] = True  # drawn among the admissible actions only
            extra["forced_tokens"] = forced_positions(row.choices, row.tokens)
        if row.stop_string is not None:
            extra["stop_string"] = row.stop_string
        return AgentOutput(
            text=text,
            token_ids=list(row.tokens),
            logprobs=list(row.logprobs),
            prompt_token_ids=list(row.prompt),
            finish_reason=row.finish_reason,
            extra=extra,
        )

    def _stop_string_hit(self, row: _Row, tail_ids: list[int]) -> str | None:
        """The first of the row's stop strings that its completion now contains, or ``None``.

        Only the tail window (``tail_ids``, the last ``stop_window`` ids) is decoded: a stop string
        completed by an earlier token would have ended the row then.
        """
        tail = self.tokenizer.decode(tail_ids, skip_special_tokens=True)
        for text in row.stop:
            if text in tail:
                return text
        return None

    def _stop_string_tokens(self, stop: tuple[str, ...], vocab: int) -> Any:
        """A ``[vocab]`` bool tensor of the tokens that can complete one of ``stop`` (on the device).

        The token that completes a stop string spells its last character, or a byte of it (a
        lone token of a multi-byte character decodes to U+FFFD), so only rows that drew such a
        token need their tail decoded. Stop strings ending in whitespace (which a tokenizer may
        drop from a token decoded alone) admit every token."""
        torch = self._torch
        key = (stop, vocab)
        mask = self._stop_masks.get(key)
        if mask is not None:
            return mask
        texts = _token_texts(self.tokenizer)[:vocab]
        if any(not text or text[-1].isspace() for text in stop):
            mask = torch.ones(vocab, dtype=torch.bool)
        else:
            last = {text[-1] for text in stop} | {"\ufffd"}
            mask = torch.ones(vocab, dtype=torch.bool)  # ids the tokenizer does not know: checked
            mask[: len(texts)] = torch.tensor([any(c in t for c in last) for t in texts], dtype=torch.bool)
        mask = mask.to(self.device)
        self._stop_masks[key] = mask
        return mask

    def _forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, cache: Any) -> tuple[Any, Any]:
        kwargs: dict[str, Any] = {}
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = 1  # only the last position's logits: the prompt's would be B x L x V
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            **{self._cache_name: cache},
            **kwargs,
        )
        return out.logits[:, -1, :].float(), getattr(out, self._cache_name)

    def _prefill(self, rows: list[_Row]) -> tuple[Any, Any, Any, Any]:
        """Run the prompts of ``rows`` (sorted by the length past their cached prefix) through the
        model: the last position's logits, the KV cache, the attention mask and the position ids
        of the decoding batch.

        Prompts of similar length are run together (:func:`_prefill_buckets`), so a batch that
        mixes 250- and 600-token prompts does not compute 600 positions for each, and system
        turns already cached are not run again (:meth:`_bucketed_prefill`); decoding then goes on
        in one batch (a decoding step costs about the same for 8 rows as for 40: it reads every
        weight once). Padded positions are masked, so each row's numbers are those of one padded
        forward pass over the whole prompts, up to float rounding. That single pass is also what
        runs when there is nothing to split, or when the model's cache cannot be taken apart
        (not a plain ``DynamicCache``).
        """
        suffixes = [len(row.prompt) - row.prefix for row in rows]
        if self._splittable and (any(row.prefix for row in rows) or len(_prefill_buckets(suffixes)) > 1):
            done = self._bucketed_prefill(rows)
            if done is not None:
                return done
        torch = self._torch
        width = max(len(row.prompt) for row in rows)
        ids = torch.full((len(rows), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            ids[r, width - len(row.prompt) :] = torch.tensor(row.prompt, dtype=torch.long)
            mask[r, width - len(row.prompt) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        # Positions count real tokens only, so a left-padded prompt sees the same positions as alone.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits, cache = self._forward(ids, mask, positions, None)
        return logits, cache, mask, positions

    def _bucketed_prefill(self, rows: list[_Row]) -> tuple[Any, Any, Any, Any] | None:
        """:meth:`_prefill` in length buckets, reusing the KV of the rows' system turns (``row.prefix`` ids).

        Prefixes not cached yet are prefilled first (in length buckets, like prompts) and kept,
        most recently used last, up to ``prefix_cache`` of them. Then each bucket of rows (rows of
        similar suffix length, sorted by it) runs only its suffixes, on top of a cache that holds
        each row's prefix left-padded to the bucket's longest; a row's attention mask is then
        ``[pad, prefix, pad, suffix]`` and positions count its real tokens only, so every row
        sees what a whole-prompt prefill gives it, up to float rounding. The buckets are stacked
        left-padded to the longest. Returns ``None`` (and turns this path off) when the model's
        cache cannot be taken apart.
        """
        torch = self._torch
        device = self.device
        functional = torch.nn.functional
        keys = [tuple(row.prompt[: row.prefix]) if row.reuse is None else () for row in rows]
        missing = sorted({k for k in keys if k and k not in self._prefixes}, key=len)
        for start, end in _prefill_buckets([len(k) for k in missing]) if missing else []:
            part = missing[start:end]
            width = len(part[-1])
            ids = torch.full((len(part), width), self._pad_id, dtype=torch.long)
            mask = torch.zeros((len(part), width), dtype=torch.long)
            for r, key in enumerate(part):
                ids[r, width - len(key) :] = torch.tensor(key, dtype=torch.long)
                mask[r, width - len(key) :] = 1
            ids, mask = ids.to(device), mask.to(device)
            _, cache = self._forward(ids, mask, (mask.cumsum(-1) - 1).clamp(min=0), None)
            layers = _cache_layers(cache)
            if layers is None:
                self._splittable = False
                return None
            for r, key in enumerate(part):
                self._prefixes[key] = [
                    (k[r : r + 1, :, width - len(key) :].clone(), v[r : r + 1, :, width - len(key) :].clone())
                    for k, v in layers
                ]
        for key in keys:
            if key:
                self._prefixes.move_to_end(key)

        suffixes = [len(row.prompt) - row.prefix for row in rows]
        logits_parts, layer_parts, mask_parts = [], [], []
        for start, end in _prefill_buckets(suffixes):
            bucket = rows[start:end]
            longest_prefix = max(row.prefix for row in bucket)
            longest_suffix = max(suffixes[start:end])
            total = longest_prefix + longest_suffix
            ids = torch.full((len(bucket), longest_suffix), self._pad_id, dtype=torch.long)
            mask = torch.zeros((len(bucket), total), dtype=torch.long)
            for r, row in enumerate(bucket):
                suffix = row.prompt[row.prefix :]
                ids[r, longest_suffix - len(suffix) :] = torch.tensor(suffix, dtype=torch.long)
                mask[r, longest_prefix - row.prefix : longest_prefix] = 1
                mask[r, total - len(suffix) :] = 1
            ids, mask = ids.to(device), mask.to(device)
            past = None
            if longest_prefix:
                cached = [
                    [(k[:, :, : row.prefix], v[:, :, : row.prefix]) for k, v in row.reuse]
                    if row.reuse is not None
                    else self._prefixes[key]
                    if key
                    else None
                    for row, key in zip(bucket, keys[start:end], strict=True)
                ]
                template = next(layers for layers in cached if layers is not None)
                # A row without a prefix contributes an empty prefix: all padding.
                past = self._stacked_cache(
                    [
                        [(k[:, :, :0], v[:, :, :0]) for k, v in template] if layers is None else layers
                        for layers in cached
                    ],
                    longest_prefix,
                )
            positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, longest_prefix:]
            part_logits, part_cache = self._forward(ids, mask, positions, past)
            layers = _cache_layers(part_cache)
            if layers is None:
                self._splittable = False
                return None
            logits_parts.append(part_logits)
            layer_parts.append(layers)
            mask_parts.append(mask)
        while len(self._prefixes) > self.prefix_cache:
            self._prefixes.popitem(last=False)
        width = max(m.shape[1] for m in mask_parts)
        attention_mask = torch.cat([functional.pad(m, (width - m.shape[1], 0)) for m in mask_parts], dim=0)
        cache = self._stacked_cache(layer_parts, width)
        return torch.cat(logits_parts, dim=0), cache, attention_mask, (attention_mask.cumsum(-1) - 1).clamp(min=0)

    def _stacked_cache(self, parts: list[list[tuple[Any, Any]]], width: int) -> Any:
        """One ``DynamicCache`` of the buckets' ``(keys, values)`` per layer, each left-padded
        with zeros (masked positions) to ``width`` and stacked along the batch."""
        from transformers import DynamicCache

        functional = self._torch.nn.functional
        try:
            cache = DynamicCache(config=self.model.config)
        except TypeError:  # pragma: no cover - transformers without the config argument
            cache = DynamicCache()
        for layer in range(len(parts[0])):
            keys, values = [], []
            for part in parts:
                k, v = part[layer]
                pad = (0, 0, width - k.shape[-2], 0)
                keys.append(functional.pad(k, pad))
                values.append(functional.pad(v, pad))
            cache.update(self._torch.cat(keys, dim=0), self._torch.cat(values, dim=0), layer)
        return cache

    def _generate(self, rows: list[_Row]) -> None:
        """Decode ``rows`` together, filling in their tokens, log-probs and finish reasons.

        Sampled ids and log-probs stay on the device, in one ``[rows, longest limit]`` table each,
        until every row has finished (one transfer at the end). Each step brings back one small
        integer per live row saying what the host must look at: a stop token or the length limit
        ended it, or it drew a token that could complete one of its stop strings (then its tail
        is decoded), or it replies among admissible actions (the host keeps its trie walk).
        """
        torch = self._torch
        device = self.device
        # Similar lengths of what must be prefilled (the prompt past any cached prefix) go together.
        rows = sorted(rows, key=lambda row: len(row.prompt) - row.prefix)  # the rows are filled in place
        # Equal prompts (a GRPO group: one task, several replies) are prefilled once and their
        # logits and KV copied to each row; every row still draws with its own key.
        first: dict[tuple[int, ...], int] = {}
        owner = [first.setdefault(tuple(row.prompt), len(first)) for row in rows]
        if len(first) < len(rows):
            unique = [rows[owner.index(k)] for k in range(len(first))]
            logits, cache, attention_mask, position_ids = self._prefill(unique)
            index = torch.tensor(owner, dtype=torch.long, device=device)
            _select_cache_rows(cache, index)
            logits, attention_mask, position_ids = logits[index], attention_mask[index], position_ids[index]
        else:
            logits, cache, attention_mask, position_ids = self._prefill(rows)
        next_position = position_ids[:, -1:] + 1

        n, vocab = len(rows), logits.shape[-1]
        width = max(row.limit for row in rows)
        _make_room(cache, width - 1)  # each step's keys and values are written in place, not appended
        out_tokens = torch.zeros((n, width), dtype=torch.long, device=device)
        out_lp = torch.zeros((n, width), dtype=torch.float32, device=device)
        out_slp = torch.zeros((n, width), dtype=torch.float32, device=device)
        keys = torch.tensor([row.key for row in rows], dtype=torch.long, device=device)
        limits = torch.tensor([row.limit for row in rows], dtype=torch.long, device=device)
        stop_ids = torch.zeros(vocab, dtype=torch.bool)
        if not self.ignore_eos:
            stop_ids[[i for i in self.stop_token_ids if 0 <= i < vocab]] = True
        stop_ids = stop_ids.to(device)
        # What a row's drawn token asks of the host, per row: its stop strings' candidate tokens
        # (set 0: none), and whether it walks the admissible-action trie (every step).
        sets: dict[tuple[str, ...], int] = {(): 0}
        row_set = [0 if self.ignore_eos else sets.setdefault(row.stop, len(sets)) for row in rows]
        masks = [torch.zeros(vocab, dtype=torch.bool, device=device)]
        masks += [self._stop_string_tokens(stop, vocab) for stop in list(sets)[1:]]
        string_tokens = torch.stack(masks)
        row_set_t = torch.tensor(row_set, dtype=torch.long, device=device)
        # With ignore_eos nothing but the length ends a row; the trie walk still restricts the draw.
        walks = torch.tensor([row.choices is not None for row in rows], dtype=torch.bool, device=device)
        any_walk = bool(any(row.choices is not None for row in rows))

        kept_kv: list[tuple[_Row, Any, int]] = []  # finished rows' KV, stored once their ids are known
        active = list(range(n))  # row index of each batch line
        lines_t = torch.arange(n, device=device)  # the same, on the device
        step = 0
        while True:
            allowed = [rows[r].allowed(self.stop_token_ids) for r in active] if any_walk else None
            tokens, model_lp, sampling_lp = sample_next_tokens(
                logits,
                keys[lines_t],
                step=step,
                temperature=self.temperature,
                top_k=self.top_k,
                top_p=self.top_p,
                allowed=allowed if allowed and any(a is not None for a in allowed) else None,
            )
            out_tokens[lines_t, step] = tokens
            out_lp[lines_t, step] = model_lp
            out_slp[lines_t, step] = sampling_lp
            # 1: a stop token, 2: the length limit, 4: the host must look (stop string or trie).
            look = string_tokens[row_set_t[lines_t], tokens] | walks[lines_t]
            codes = stop_ids[tokens].long() + 2 * (limits[lines_t] <= step + 1).long() + 4 * look.long()
            codes = codes.tolist()  # the step's one synchronisation
            host = [line for line, code in enumerate(codes) if code & 4 and not code & 1]
            if host:
                start = max(0, step + 1 - max(rows[active[line]].stop_window for line in host))
                chosen = lines_t[torch.tensor(host, dtype=torch.long, device=device)]
                tails = out_tokens[chosen, start : step + 1].tolist()
            keep = []
            for line, r in enumerate(active):
                row, code = rows[r], codes[line]
                stopped = bool(code & 1)
                if code & 4 and not stopped:
                    tail = tails[host.index(line)]
                    if row.choices is not None:
                        row.tokens.append(tail[-1])  # the trie walk needs the reply so far
                    if not self.ignore_eos:
                        row.stop_string = self._stop_string_hit(row, tail[-row.stop_window :]) if row.stop else None
                        stopped = row.stop_string is not None or row.chose()
                if stopped:
                    row.finish_reason = "stop"
                elif code & 2:
                    row.finish_reason = "length"
                else:
                    keep.append(line)
                if row.finish_reason is not None:
                    row.length = step + 1
            finished = sorted(set(range(len(active))) - set(keep))
            if finished:
                kv = self._keep_episode_kv(finished, cache, attention_mask)
                kept_kv += [(rows[active[line]], layers, step) for line, layers in zip(finished, kv, strict=True)]
            if not keep:
                break
            step_ids = tokens.unsqueeze(-1)
            if len(keep) < len(active):
                # Finished episodes leave the batch (their cache rows too): no compute on them.
                index = torch.tensor(keep, dtype=torch.long, device=device)
                _select_cache_rows(cache, index)
                step_ids, attention_mask, next_position = step_ids[index], attention_mask[index], next_position[index]
                lines_t = lines_t[index]
                active = [active[line] for line in keep]
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(active), 1))], dim=-1)
            logits, cache = self._forward(step_ids, attention_mask, next_position, cache)
            next_position = next_position + 1
            step += 1
        tokens_all, lp_all, slp_all = out_tokens.tolist(), out_lp.tolist(), out_slp.tolist()  # the one transfer
        for r, row in enumerate(rows):
            row.tokens = tokens_all[r][: row.length]
            row.logprobs = lp_all[r][: row.length]
            row.sampling_logprobs = slp_all[r][: row.length]
        for row, layers, fed in kept_kv:
            self._store_episode_kv(row, layers, fed)


#: The ``choices`` modes: any reply, or one of the input's admissible actions.
CHOICES = ("free", "admissible")
#: The shortest system turn worth caching (in tokens): shorter ones are prefilled with the prompt.
MIN_PREFIX = 16
#: The most positions (prompt + reply ids) of episodes' last sequences whose KV is kept for their
#: next turn; about 46 KB each for SmolLM2-135M in float32, so 1.5 GB at most.
EPISODE_KV_POSITIONS = 32768
#: A prefill bucket holds prompts whose padding adds at most this share of computed positions ...
PREFILL_PADDING = 0.10
#: ... and at most this many positions (rows x longest prompt), which bounds the prefill's memory.
PREFILL_POSITIONS = 16384


def threads_for_load(load: float, cores: int, own: int, most: int) -> int:
    """Torch threads for a call, given the 1-minute ``load`` average, the machine's ``cores``,
    the threads this process ran with during the previous call (``own``, its share of that
    load) and the ``most`` it may use: the cores the other processes leave free, rounded to
    the nearest (the load average is a smoothed count of runnable threads), and one when they
    leave less than one free."""
    free = cores - max(0.0, load - own)
    return max(1, min(most, cores, int(free + 0.5)))


def _prefill_buckets(lengths: Sequence[int]) -> list[tuple[int, int]]:
    """Split prompts sorted by length into runs ``[start, end)`` that are cheap to pad together:
    a run grows while ``rows x longest <= (1 + PREFILL_PADDING) x real positions`` and
    ``rows x longest <= PREFILL_POSITIONS`` (a single prompt always makes a run)."""
    buckets: list[tuple[int, int]] = []
    start, total = 0, 0
    for i, length in enumerate(lengths):
        rows = i - start + 1
        if i > start and (
            rows * length > (1 + PREFILL_PADDING) * (total + length) or rows * length > PREFILL_POSITIONS
        ):
            buckets.append((start, i))
            start, total = i, 0
        total += length
    buckets.append((start, len(lengths)))
    return buckets


#: Each tokenizer's ids decoded one by one (for the stop-string filter). Decoding a 49k vocabulary
#: takes most of a second and the trainer builds an agent (and loads a tokenizer) per rollout, so a
#: fast tokenizer's texts are kept by its content (the serialised tokenizer: vocabulary, added and
#: special tokens, decoder), the same for every copy loaded from the same files; any other kept
#: while that tokenizer object lives.
_TOKEN_TEXTS: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()
_TOKEN_TEXTS_BY_CONTENT: collections.OrderedDict[tuple[str, int, str], list[str]] = collections.OrderedDict()
_TOKEN_TEXTS_KEPT = 4


def _tokenizer_content_key(tokenizer: Any) -> tuple[str, int, str] | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    to_str = getattr(backend, "to_str", None)
    if to_str is None:
        return None
    try:
        serialised = to_str()
    except Exception:  # noqa: BLE001 - a backend that cannot serialise: cached by identity instead
        return None
    if not isinstance(serialised, str):
        return None
    digest = hashlib.sha256(serialised.encode("utf-8", "surrogatepass")).hexdigest()
    return (type(tokenizer).__qualname__, len(tokenizer), digest)


def _token_texts(tokenizer: Any) -> list[str]:
    texts = _TOKEN_TEXTS.get(tokenizer)
    if texts is not None:
        return texts
    key = _tokenizer_content_key(tokenizer)
    texts = _TOKEN_TEXTS_BY_CONTENT.get(key) if key is not None else None
    if texts is None:
        texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=True)
        if key is not None:
            _TOKEN_TEXTS_BY_CONTENT[key] = texts
            while len(_TOKEN_TEXTS_BY_CONTENT) > _TOKEN_TEXTS_KEPT:
                _TOKEN_TEXTS_BY_CONTENT.popitem(last=False)
    elif key is not None:
        _TOKEN_TEXTS_BY_CONTENT.move_to_end(key)
    _TOKEN_TEXTS[tokenizer] = texts
    return texts


def _cache_layers(cache: Any) -> list[tuple[Any, Any]] | None:
    """``(keys, values)`` of every layer of a plain transformers ``DynamicCache`` (each
    ``[batch, kv_heads, positions, head_dim]``), or ``None`` for any other cache (sliding
    windows, quantised, legacy tuples), which :meth:`HFAgent._prefill` then leaves whole."""
    layers = getattr(cache, "layers", None)
    if type(cache).__name__ != "DynamicCache" or not layers:
        return None
    plain = ("DynamicLayer", "_RoomyLayer")
    if any(type(layer).__name__ not in plain or getattr(layer, "keys", None) is None for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


_ROOMY_LAYER: Any = None


def _roomy_layer_class() -> Any:
    """A ``DynamicLayer`` whose keys and values live in buffers with spare positions at the end.

    transformers' ``DynamicLayer`` appends each decoding step's keys and values with
    ``torch.cat``, which copies the whole cache every step: on a 2-core CPU that was a quarter
    of a step for 40 rows of 400 positions. This layer writes them into the spare room in place
    and hands attention views of the filled part: the same tensors, so the same numbers bit for
    bit (checked in the tests). Anything that assigns ``keys`` (a crop, a device move) leaves it
    without room; the next update then allocates fresh room."""
    global _ROOMY_LAYER
    if _ROOMY_LAYER is None:
        from transformers.cache_utils import DynamicLayer

        class _RoomyLayer(DynamicLayer):
            def __init__(self, keys: Any, values: Any, room: int) -> None:
                super().__init__()
                self.room = max(1, room)
                self._grow(keys, values, len_=keys.shape[-2])
                self.is_initialized = True
                self.device = keys.device

            def _grow(self, keys: Any, values: Any, len_: int) -> None:
                # keys/values: the filled part; a buffer of len_ + room positions holds them.
                batch, heads, _, dim = keys.shape
                self._k = keys.new_empty((batch, heads, len_ + self.room, dim))
                self._v = values.new_empty((batch, heads, len_ + self.room, values.shape[-1]))
                self._k[:, :, : keys.shape[-2]] = keys
                self._v[:, :, : values.shape[-2]] = values
                self._n = keys.shape[-2]

            @property  # type: ignore[override]
            def keys(self) -> Any:
                return None if self._k is None else self._k[:, :, : self._n]

            @keys.setter
            def keys(self, value: Any) -> None:
                self._k = value
                self._n = 0 if value is None else value.shape[-2]

            @property  # type: ignore[override]
            def values(self) -> Any:
                return None if self._v is None else self._v[:, :, : self._n]

            @values.setter
            def values(self, value: Any) -> None:
                self._v = value

            def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
                new = key_states.shape[-2]
                if self._n + new > self._k.shape[-2]:
                    self._grow(self.keys, self.values, self._n + new)
                self._k[:, :, self._n : self._n + new] = key_states
                self._v[:, :, self._n : self._n + new] = value_states
                self._n += new
                return self.keys, self.values

            def reorder_cache(self, beam_idx: Any) -> None:
                index = beam_idx.to(self._k.device)
                self._k, self._v = self._k.index_select(0, index), self._v.index_select(0, index)

            def batch_select_indices(self, indices: Any) -> None:
                self._k, self._v = self._k[indices, ...], self._v[indices, ...]

        _ROOMY_LAYER = _RoomyLayer
    return _ROOMY_LAYER


def _make_room(cache: Any, room: int) -> None:
    """Give every layer of a plain ``DynamicCache`` ``room`` spare positions for decoding
    (:func:`_roomy_layer_class`), in place; any other cache is left as it is."""
    layers = _cache_layers(cache)
    if layers is None or room <= 0:
        return
    roomy = _roomy_layer_class()
    for i, (keys, values) in enumerate(layers):
        cache.layers[i] = roomy(keys, values, room)
