"""The policy being trained: the language model, optional LoRA adapters, PPO's value head, the
frozen reference for the KL penalty, and how rollouts are generated from it.

The training forward pass runs the model's backbone once per micro-batch and applies the output
layer only at the completion positions (where the loss is): the ``[N, L, vocab]`` logits of the
whole sequence would dwarf everything else in memory. The same hidden states give PPO's value,
read at the last prompt token of each turn. Sequences of a micro-batch that share a prompt (a
GRPO group's members) are packed behind one copy of it (:mod:`envgym.trainer.packing`), so the
prompt is forwarded once, with the same log-probs and gradients.

**The policy is the model at the sampling temperature.** Rollouts sample from
``softmax(logits / temperature)`` (possibly truncated by top-p, which is a sampling device and
not part of the policy), so every log-prob the loss uses -- the current policy's, the old ones
(see :mod:`envgym.trainer.batch`), the reference's for the KL penalty -- and the entropy are
those of ``logits / temperature``, as in verl. At the first pass of an update the importance
ratio is then 1 up to float rounding.

**Data parallel.** Backbone, output layer and value head sit in one ``torch.nn.Module``
(:attr:`PolicyModel.core`); under ``torchrun`` the loop wraps it in
``torch.nn.parallel.DistributedDataParallel`` (:meth:`PolicyModel.wrap_data_parallel`) so the
gradients of every rank are all-reduced in the backward pass of the last micro-batch of each
optimizer step (:meth:`PolicyModel.no_sync` holds the others back).

Generation sits behind the small :class:`Generation` interface. :class:`HFGeneration` wraps the
*live* model in the harness's ``hf`` agent (no copy: every update is seen by the next rollout);
a vLLM or remote engine would implement the same two methods (``sync`` pushes the new weights to
the engine, ``agent`` returns an :class:`~envgym.rollout.agent.Agent` such as the ``openai``
agent) without touching the loop.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from envgym._imports import optional
from envgym.errors import ConfigError
from envgym.models import load_causal_lm, tiny_causal_lm
from envgym.rollout.specs import make_agent
from envgym.trainer.algorithms import get_algorithm
from envgym.trainer.config import TrainConfig
from envgym.trainer.packing import attention_span, plan_prompt_packs, shares_prompts

__all__ = ["Generation", "HFGeneration", "PolicyModel", "PolicyOutput", "load_policy"]

log = logging.getLogger(__name__)

ADAPTER_DIR = "adapter"
MODEL_DIR = "model"


class Generation(Protocol):
    """Where rollouts come from. ``sync`` is called after every optimizer update."""

    def sync(self) -> None:
        """Make the next agents use the current weights (a no-op for the live in-process model)."""

    def agent(self, *, temperature: float, top_p: float, seed: int, name: str) -> Any:
        """A harness agent sampling from the current policy."""


@dataclass
class PolicyOutput:
    """Per-token quantities of a micro-batch, aligned with ``input_ids`` (0 where masked).

    Attributes:
        logprobs: ``[N, L]`` log-probability of each completion token under the policy.
        entropy: ``[N, L]`` entropy of the next-token distribution that produced each completion
            token, or ``None`` when not asked for.
        values: ``[N]`` value estimates at the last prompt token (PPO), or ``None``.
    """

    logprobs: Any
    entropy: Any = None
    values: Any = None


def _torch() -> Any:
    return optional("torch", purpose="training")


def resolve_device_dtype(config: TrainConfig) -> tuple[Any, Any]:
    """The torch device and dtype a config asks for (``auto``: CUDA + bfloat16, else CPU + float32)."""
    torch = _torch()
    if config.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(config.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"device={config.device!r} but CUDA is not available here; use device='auto' or 'cpu'.")
    if config.dtype == "auto":
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    else:
        dtype = getattr(torch, config.dtype)
    return device, dtype


class PolicyModel:
    """A causal LM being trained, with what the loss needs around it (the scripted agents' per-episode
    decision maker is :class:`envgym.rollout.Policy`, a different thing).

    Attributes:
        model: the trainable model (a ``peft`` model when LoRA is on).
        base_model: the transformers model itself (LoRA layers live inside it).
        tokenizer: its tokenizer.
        value_head: PPO's ``Linear(hidden, 1)`` (float32), else ``None``.
        reference: a frozen copy of the initial model for the KL penalty (full fine-tuning with
            ``kl_coef > 0``), else ``None`` (with LoRA the reference is the base model with the
            adapters disabled).
        lora: whether LoRA adapters are trained.
    """

    def __init__(self, model: Any, tokenizer: Any, config: TrainConfig, *, device: Any) -> None:
        torch = _torch()
        self.config = config
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.lora = config.lora is not None
        self.base_model = model.get_base_model() if self.lora else model
        self.backbone = getattr(self.base_model, self.base_model.base_model_prefix)
        self.lm_head = self.base_model.get_output_embeddings()
        if self.lm_head is None:
            raise ConfigError(f"model {config.model!r} has no output embedding layer; it is not a causal LM.")
        hidden = int(self.base_model.config.hidden_size)
        self.value_head = None
        if get_algorithm(config.algo).value_head:
            self.value_head = torch.nn.Linear(hidden, 1, dtype=torch.float32, device=device)
            torch.nn.init.zeros_(self.value_head.weight)  # the first values are 0: advantages start as returns
            torch.nn.init.zeros_(self.value_head.bias)
        self.reference = None
        if config.kl_coef > 0 and not self.lora:
            self.reference = copy.deepcopy(self.base_model).eval()
            for p in self.reference.parameters():
                p.requires_grad_(False)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else (tokenizer.eos_token_id or 0))
        self.temperature = float(config.temperature)
        self.core = _core_module(self.backbone, self.lm_head, self.value_head)
        # Prompt-shared packing needs an attention that takes a block mask (not flash-attention).
        self.share_prompts = bool(config.share_prompts) and shares_prompts(self.base_model)
        self.attention_span = attention_span(self.base_model)
        self.data_parallel: Any = None  # DistributedDataParallel(core) under torchrun

    # -------------------------------------------------------------------------- data parallel
    def wrap_data_parallel(self, device_ids: list[int] | None = None) -> None:
        """Wrap :attr:`core` in ``DistributedDataParallel`` (the process group must be initialised):
        from now on the backward pass of :meth:`forward` all-reduces (averages) the gradients."""
        torch = _torch()
        ddp = torch.nn.parallel.DistributedDataParallel
        # The buffers (rotary frequencies) are the same on every rank and never change: no syncing
        # before each forward. Newer torch names the switch forward_sync_buffers.
        if "forward_sync_buffers" in inspect.signature(ddp).parameters:
            sync = {"forward_sync_buffers": False}
        else:  # pragma: no cover - torch < 2.13
            sync = {"broadcast_buffers": False}
        self.data_parallel = ddp(self.core, device_ids=device_ids, **sync)

    def no_sync(self) -> Any:
        """A context in which backward passes accumulate gradients without all-reducing them."""
        return self.data_parallel.no_sync() if self.data_parallel is not None else nullcontext()

    # -------------------------------------------------------------------------- parameters
    def trainable_parameters(self) -> list[Any]:
        """Model parameters that train (all, or the LoRA ones), then the value head's."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.value_head is not None:
            params += list(self.value_head.parameters())
        return params

    def named_trainable_parameters(self) -> dict[str, Any]:
        named = {f"model.{n}": p for n, p in self.model.named_parameters() if p.requires_grad}
        if self.value_head is not None:
            named.update({f"value_head.{n}": p for n, p in self.value_head.named_parameters()})
        return named

    def train(self, mode: bool = True) -> None:
        self.model.train(mode)
        if self.value_head is not None:
            self.value_head.train(mode)

    # -------------------------------------------------------------------------- forward
    def forward(
        self,
        batch: Any,
        *,
        entropy: bool = False,
        values: bool = False,
        reference: bool = False,
        entropy_grad: bool = True,
    ) -> PolicyOutput:
        """Log-probs (and entropies, values) of a :class:`~envgym.trainer.batch.TrainBatch`, for
        the policy at the sampling temperature (``logits / temperature``).

        With ``reference=True`` the reference model is used (no gradient). ``entropy_grad=False``
        computes the entropy for the metrics only (no graph through it: less memory). With a
        gradient the pass goes through the data-parallel wrapper when there is one. Rows that
        share a prompt are packed behind one copy of it (:func:`~envgym.trainer.packing.plan_prompt_packs`)
        when :attr:`share_prompts` is on and packing is cheaper.
        """
        torch = _torch()
        from envgym.trainer import losses

        ids = batch.input_ids.to(self.device)
        attention = batch.attention_mask.to(self.device)
        predict = batch.loss_mask[:, 1:].to(self.device) > 0  # [N, L-1]: the next token carries loss
        want_values = values and self.value_head is not None and not reference
        index = batch.value_index.to(self.device) if want_values else None
        packs = plan_prompt_packs(batch, span=self.attention_span) if self.share_prompts else None
        if packs is not None:
            packs = packs.to(self.device)
        with self._reference() if reference else nullcontext(None) as ref_model:
            if ref_model is not None:
                core = _core_module(getattr(ref_model, ref_model.base_model_prefix), ref_model.get_output_embeddings())
            elif self.data_parallel is not None and torch.is_grad_enabled():
                core = self.data_parallel
            else:
                core = self.core
            logits, value = core(ids, attention, predict, index, packs)
            scaled = logits / self.temperature if self.temperature != 1.0 else logits
            targets = ids[:, 1:][predict]
            token_lp = losses.token_logprobs(scaled, targets)
            n, width = ids.shape
            zeros = torch.zeros((n, width - 1), dtype=torch.float32, device=self.device)
            logprobs = torch.nn.functional.pad(zeros.masked_scatter(predict, token_lp), (1, 0))
            out = PolicyOutput(logprobs=logprobs, values=value)
            if entropy:
                ent = losses.entropy_from_logits(scaled if entropy_grad else scaled.detach())
                out.entropy = torch.nn.functional.pad(zeros.masked_scatter(predict, ent), (1, 0))
        return out

    @contextmanager
    def _reference(self) -> Iterator[Any]:
        torch = _torch()
        with torch.no_grad():
            if self.reference is not None:
                yield self.reference
            elif self.lora:
                with self.model.disable_adapter():
                    yield self.base_model
            else:
                raise ConfigError("no reference model: the KL penalty needs kl_coef > 0.")

    # -------------------------------------------------------------------------- saving
    def save(self, folder: Path) -> None:
        """Write the weights into ``folder``: a transformers model folder (full fine-tuning) or a
        peft adapter folder (LoRA), plus ``value_head.safetensors`` for PPO."""
        from safetensors.torch import save_file
        from transformers.utils import logging as hf_logging

        # Library code draws no progress bar on stderr (transformers shows one while writing shards).
        was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            if self.lora:
                self.model.save_pretrained(folder / ADAPTER_DIR, safe_serialization=True)
            else:
                self.model.save_pretrained(folder / MODEL_DIR, safe_serialization=True)
                self.tokenizer.save_pretrained(folder / MODEL_DIR)
        finally:
            if was_enabled:
                hf_logging.enable_progress_bar()
        if self.value_head is not None:
            state = {k: v.detach().contiguous().cpu() for k, v in self.value_head.state_dict().items()}
            save_file(state, str(folder / "value_head.safetensors"))

    def load(self, folder: Path) -> None:
        """Load weights written by :meth:`save` into this policy (in place, exactly)."""
        from safetensors.torch import load_file

        torch = _torch()
        if self.lora:
            from peft import set_peft_model_state_dict

            state = load_file(str(folder / ADAPTER_DIR / "adapter_model.safetensors"), device=str(self.device))
            result = set_peft_model_state_dict(self.model, state)
            unexpected = getattr(result, "unexpected_keys", [])
            if unexpected:
                raise ConfigError(f"checkpoint {folder} holds adapter weights this model lacks: {unexpected[:5]}.")
        else:
            files = sorted((folder / MODEL_DIR).glob("*.safetensors"))
            if not files:
                raise ConfigError(f"checkpoint {folder} has no model weights (*.safetensors in {MODEL_DIR}/).")
            state: dict[str, Any] = {}
            for file in files:
                state.update(load_file(str(file), device=str(self.device)))
            own = self.model.state_dict()
            missing, unexpected = self.model.load_state_dict(state, strict=False)
            loaded_ptrs = {own[k].data_ptr() for k in state if k in own}
            # Tied weights (lm_head = embeddings) are saved once; they are loaded through their twin.
            untied = [k for k in missing if own[k].data_ptr() not in loaded_ptrs]
            if untied or unexpected:
                raise ConfigError(
                    f"checkpoint {folder} does not match the model: missing {untied[:5]}, unexpected {unexpected[:5]}."
                )
        if self.value_head is not None:
            state = load_file(str(folder / "value_head.safetensors"), device=str(self.device))
            self.value_head.load_state_dict({k: v.to(torch.float32) for k, v in state.items()})

    # -------------------------------------------------------------------------- generation
    def generation(self) -> Generation:
        return HFGeneration(self)


_CORE_CLASS: Any = None


def _core_module(backbone: Any, lm_head: Any, value_head: Any = None) -> Any:
    """The trainable forward pass as one ``torch.nn.Module`` (what ``DistributedDataParallel``
    wraps): ``core(input_ids, attention_mask, predict, value_index, packs) -> (logits, values)``, where
    ``logits`` are the float32 output-layer logits at the ``predict`` positions (``[K, vocab]``) and
    ``values`` the value head read at ``value_index`` (``None`` without it). With ``packs`` (a
    :class:`~envgym.trainer.packing.PromptPacks` of the same rows) the backbone runs over the packs
    instead of the padded rows, and the outputs are gathered back into the rows' order."""
    global _CORE_CLASS
    torch = _torch()
    if _CORE_CLASS is None:

        class PolicyCore(torch.nn.Module):
            def __init__(self, backbone: Any, lm_head: Any, value_head: Any) -> None:
                super().__init__()
                self.backbone = backbone
                self.lm_head = lm_head
                self.value_head = value_head

            def forward(
                self, input_ids: Any, attention_mask: Any, predict: Any, value_index: Any = None, packs: Any = None
            ) -> Any:
                if packs is not None:
                    return self.packed(packs, values=value_index is not None)
                hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
                hidden = hidden.last_hidden_state
                logits = self.lm_head(hidden[:, :-1][predict]).float()  # [K, vocab]
                values = None
                if value_index is not None and self.value_head is not None:
                    rows = torch.arange(hidden.shape[0], device=hidden.device)
                    values = self.value_head(hidden[rows, value_index].float()).squeeze(-1)
                return logits, values

            def packed(self, packs: Any, *, values: bool) -> Any:
                config = self.backbone.config
                dtype = self.backbone.get_input_embeddings().weight.dtype
                mask = packs.attention_mask(dtype, config._attn_implementation)
                hidden = self.backbone(
                    input_ids=packs.input_ids, attention_mask=mask, position_ids=packs.position_ids, use_cache=False
                ).last_hidden_state
                flat = hidden.reshape(-1, hidden.shape[-1])
                logits = self.lm_head(flat[packs.predict_source]).float()  # [K, vocab], in the rows' order
                out = None
                if values and self.value_head is not None:
                    out = self.value_head(flat[packs.value_source].float()).squeeze(-1)
                return logits, out

        _CORE_CLASS = PolicyCore
    return _CORE_CLASS(backbone, lm_head, value_head)


class HFGeneration:
    """Rollouts from the live model through the harness's ``hf`` agent (no weight copy)."""

    def __init__(self, policy: PolicyModel) -> None:
        self.policy = policy

    def sync(self) -> None:
        """Nothing to do: the agent samples from the very tensors the optimizer updates."""

    def agent(self, *, temperature: float, top_p: float, seed: int, name: str) -> Any:
        cfg = self.policy.config
        return make_agent(
            "hf",
            seed=seed,
            # The base model: with LoRA its layers already carry the adapters, and unlike the peft
            # wrapper its forward accepts logits_to_keep (no full-vocabulary logits over the prompt).
            model_obj=self.policy.base_model,
            tokenizer=self.policy.tokenizer,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=cfg.max_new_tokens,
            batch_size=cfg.generation_batch_size,
            choices=cfg.choices,
            name=name,
        )


def _apply_lora(model: Any, config: TrainConfig) -> Any:
    peft = optional("peft", purpose="LoRA training (lora=...)")
    lora = dict(config.lora or {})
    layers = None
    targets = lora["target_modules"]
    top = lora.get("top_layers")
    if top is not None:
        total = int(model.config.num_hidden_layers)
        if top > total:
            raise ConfigError(f"lora.top_layers={top} but {config.model!r} has {total} layers.")
        layers = list(range(total - top, total))
        if isinstance(targets, str):  # peft takes a layer subset with module names only
            import torch

            targets = sorted(
                {
                    name.rsplit(".", 1)[-1]
                    for name, module in model.named_modules()
                    if isinstance(module, torch.nn.Linear) and "lm_head" not in name
                }
            )
    lora_config = peft.LoraConfig(
        r=int(lora["r"]),
        lora_alpha=float(lora["alpha"]),
        lora_dropout=float(lora["dropout"]),
        target_modules=targets,
        layers_to_transform=layers,
        bias="none",
        task_type="CAUSAL_LM",
    )
    try:
        return peft.get_peft_model(model, lora_config)
    except ValueError as err:
        raise ConfigError(f"cannot add LoRA adapters with {lora!r} to {config.model!r}: {err}") from err


def load_policy(config: TrainConfig, *, model: Any = None, tokenizer: Any = None) -> PolicyModel:
    """Build the policy of ``config``: load (or take) the model, add LoRA, the value head and the
    reference. The global torch RNG must be seeded first (LoRA's initialisation draws from it).

    Args:
        config: the run configuration.
        model: a live transformers causal LM to train instead of loading ``config.model``.
        tokenizer: its tokenizer (required with ``model``).
    """
    torch = _torch()
    device, dtype = resolve_device_dtype(config)
    if config.auto_fields:  # a config not yet sized (the trainer resolves it first): by the device's profile
        config = config.resolve(device.type)
    if model is not None:
        if tokenizer is None:
            raise ConfigError("load_policy(model=...) needs the model's tokenizer too.")
        model.to(device)
    elif config.model == "tiny":
        model, tokenizer = tiny_causal_lm(seed=config.seed, device=device, dtype=dtype)
    else:
        model, tokenizer = load_causal_lm(os.path.expanduser(config.model), device=device, dtype=dtype)
    model.config.use_cache = False
    if config.gradient_checkpointing:
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.24 (the old name warns)
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:  # pragma: no cover - older transformers
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if config.lora is not None:
        model = _apply_lora(model, config)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
    model.train()
    del torch
    return PolicyModel(model, tokenizer, config, device=device)
