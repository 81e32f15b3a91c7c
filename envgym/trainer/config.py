"""``TrainConfig``: every setting of a training run, validated before anything loads.

A config is a frozen keyword-only dataclass. Each field's ``metadata["help"]`` is its
documentation and the ``envgym train`` help text (see :func:`field_help`). Configs come from
code, from a YAML or JSON file (:meth:`TrainConfig.from_file`) and from command-line flags, in
that order of precedence: defaults < file < flags (:meth:`TrainConfig.merged`).

**Sized for the device.** The settings that decide how long an update takes (:data:`AUTO_FIELDS`:
episodes per update, turns, reply length, history, evaluation episodes) default to ``"auto"``.
:meth:`TrainConfig.resolve` fills them from a profile (:data:`PROFILES`): ``cpu`` when training
runs on a CPU (small, so a first update finishes in a couple of minutes on a laptop), ``gpu``
otherwise (the full-size values). A value given in code, a file or a flag always wins. The
trainer resolves its config before anything loads; the run folder records the resolved values
and the profile, and a resumed run takes its ``auto`` settings from that record, so it resumes
as it began on any device.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envgym.errors import ConfigError, suggest
from envgym.registration import ENV_ID
from envgym.rewards.wrappers.spec import check_reward_wrappers
from envgym.rollout.pools import BACKENDS as ROLLOUT_BACKENDS
from envgym.rollout.prompting import PromptConfig
from envgym.rollout.records import json_safe
from envgym.trainer.algorithms import algorithm_names, check_config, get_algorithm
from envgym.trainer.checkpoint import latest_checkpoint
from envgym.trainer.tracking import TRACKERS

__all__ = [
    "AGGREGATIONS",
    "ALGOS",
    "AUTO",
    "AUTO_FIELDS",
    "DTYPES",
    "PROFILES",
    "RESUMABLE_CHANGES",
    "REWARD_NORMS",
    "ROLLOUT_BACKENDS",
    "SYNONYMS",
    "TrainConfig",
    "device_profile",
    "field_help",
    "load_yaml",
    "recorded_config",
    "unknown_setting",
]

#: The built-in training algorithms (:mod:`envgym.trainer.algorithms`; more may be registered):
#: group-relative (GRPO, Dr. GRPO, RLOO, GiGPO) and PPO with a value head.
ALGOS: tuple[str, ...] = algorithm_names()
#: How reward components become the advantage: their sum, or each normalised on its own (GDPO).
REWARD_NORMS: tuple[str, ...] = ("sum", "gdpo")
#: What the trainer does about a collapsed policy (see envgym.trainer.collapse).
COLLAPSE_ACTIONS: tuple[str, ...] = ("stop", "warn", "off")
#: Loss aggregation modes understood by :func:`envgym.trainer.losses.aggregate`.
AGGREGATIONS: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "token-sum-norm",
)
#: Weight dtypes; ``auto`` is bfloat16 on CUDA and float32 elsewhere.
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
#: KL estimators of :func:`envgym.trainer.losses.kl_penalty`.
KL_ESTIMATORS: tuple[str, ...] = ("k1", "k2", "k3")
#: Fields that may change when a run resumes: they do not change what is learned (the rollout
#: backend and its workers only move where the environments step; episodes stay the same).
#: ``profile`` names which profile filled the ``auto`` settings; the values it filled are what count.
RESUMABLE_CHANGES: frozenset[str] = frozenset(
    {
        "updates",
        "checkpoint_every",
        "keep_checkpoints",
        "tensorboard",
        "out",
        "rollout_backend",
        "rollout_workers",
        "rollout_url",
        "profile",
        "generation_backend",  # where rollouts are generated, not what is learned
        "collapse",
        "collapse_patience",
        "trackers",  # where the metrics are mirrored, not what they are
    }
)
#: The value of a setting sized by the device profile (:meth:`TrainConfig.resolve`).
AUTO = "auto"
#: What the ``auto`` settings become on each profile. ``cpu``: one group of 4 episodes of at most 5
#: turns, with the reply and history limits of the ``core-v1`` suite (sized for SmolLM2-135M on a
#: CPU: 32-token replies, the previous turn and the latest observation, so a prompt stays near
#: 300 tokens): 20 generation turns and about 20 training sequences per update, which 2 CPU cores
#: get through in a couple of minutes. The ``gpu`` values (4 x 8 episodes, the environment's own
#: turn limit, up to 100 turns on FrozenLake, 128-token replies, full history) are the
#: full-size run: on such a CPU its first update had not finished after 9 minutes 40 seconds.
PROFILES: dict[str, dict[str, Any]] = {
    "cpu": {
        "group_size": 4,
        "groups_per_update": 1,
        "max_turns": 5,
        "max_new_tokens": 32,
        "prompt": {"history": "last_k", "last_k": 1},
        "eval_episodes": 8,
        "generation_batch_size": 32,
    },
    "gpu": {
        "group_size": 8,
        "groups_per_update": 4,
        "max_turns": None,
        "max_new_tokens": 128,
        "prompt": {},
        "eval_episodes": 16,
        # One decoding batch for a whole update's episodes: on an H200 the 128 sequences of a
        # 16 x 8 job decoded in batches of 32 took 3.8x TRL's single-batch generation.
        "generation_batch_size": 256,
    },
}
#: The settings whose default is ``"auto"``.
AUTO_FIELDS: tuple[str, ...] = tuple(PROFILES["cpu"])
PROFILE_NAMES: tuple[str, ...] = (AUTO, *PROFILES)
#: Keys a ``lora`` mapping may hold.
LORA_KEYS: tuple[str, ...] = ("r", "alpha", "dropout", "target_modules", "top_layers")
#: Keys a ``difficulty`` mapping may hold.
DIFFICULTY_KEYS: tuple[str, ...] = ("kwarg", "levels", "target", "window", "min_episodes")

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")

#: Names other RL trainers give to settings that are called differently here (transformers'
#: ``TrainingArguments``, TRL's ``GRPOConfig``/``PPOConfig``, verl's config keys): an unknown
#: setting with one of these names is answered with the envgym name. Only names whose meaning
#: matches are listed (TRL's ``loss_type`` or ``scale_rewards`` mix several envgym settings).
SYNONYMS: dict[str, str] = {
    "learning_rate": "lr",
    "num_generations": "group_size",
    "n_samples": "group_size",
    "rollout_n": "group_size",
    "beta": "kl_coef",
    "kl_loss_coef": "kl_coef",
    "init_kl_coef": "kl_coef",
    "kl_loss_type": "kl_estimator",
    "entropy_coeff": "entropy_coef",
    "ent_coef": "entropy_coef",
    "epsilon": "clip_low",
    "epsilon_low": "clip_low",
    "epsilon_high": "clip_high",
    "clip_ratio_low": "clip_low",
    "clip_ratio_high": "clip_high",
    "cliprange": "clip_low",
    "cliprange_value": "value_clip",
    "clip_range_vf": "value_clip",
    "max_completion_length": "max_new_tokens",
    "response_length": "max_new_tokens",
    "max_response_length": "max_new_tokens",
    "loss_agg_mode": "loss_aggregation",
    "adv_estimator": "algo",
    "algorithm": "algo",
    "num_iterations": "ppo_epochs",
    "ppo_micro_batch_size": "micro_batch_size",
    "per_device_train_batch_size": "micro_batch_size",
    "max_steps": "updates",
    "total_training_steps": "updates",
    "grad_clip": "max_grad_norm",
    "lam_gae": "lam",
    "gae_lambda": "lam",
    "discount": "gamma",
    "output_dir": "out",
    "model_name_or_path": "model",
    "model_name": "model",
    "env": "env_id",
    "env_name": "env_id",
    "environment": "env_id",
    "env_args": "env_kwargs",
    "torch_dtype": "dtype",
    "eval_steps": "eval_every",
    "save_steps": "checkpoint_every",
    "save_total_limit": "keep_checkpoints",
    "filter_groups": "dynamic_sampling",
    "max_num_gen_batches": "max_refill_rounds",
    "use_vllm": "generation_backend",
    "peft_config": "lora",
    "lora_r": "lora",
    "lora_alpha": "lora",
    "lora_dropout": "lora",
    "reward_funcs": "reward_wrappers",
}


def unknown_setting(key: str, known: Sequence[str]) -> str:
    """The message for an unknown training setting ``key``: the envgym name of another trainer's
    setting (:data:`SYNONYMS`) or the closest of ``known``, then every known name."""
    alias = SYNONYMS.get(str(key).lower())
    hint = f" Did you mean {alias!r}?" if alias in known else suggest(str(key), known)
    return f"unknown training setting {key!r}.{hint} Known settings: {', '.join(known)}."


# A YAML 1.2 float: digits with a point, an exponent or both. PyYAML follows YAML 1.1, whose floats
# need a point and a signed exponent, so ``1e-5`` and ``3e4`` would be read as strings.
_YAML_FLOAT = re.compile(
    r"""^[-+]?(?:
        [0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?   # 1.5, 1., 1.5e-3
      | \.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?          # .5, .5e1
      | [0-9][0-9_]*[eE][-+]?[0-9]+                 # 1e-5, 3E4
    )$""",
    re.VERBOSE,
)


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also reads YAML 1.2 floats such as ``1e-5`` as numbers."""


_ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_FLOAT, list("-+0123456789."))


def load_yaml(text: str) -> Any:
    """Parse YAML ``text`` as ``yaml.safe_load`` does, except that exponent floats without a point
    (``1e-5``, ``3E4``) are floats, as YAML 1.2 and JSON read them, not strings."""
    return yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader subclass: no arbitrary objects


def _help(text: str) -> dict[str, str]:
    return {"help": text}


def _shown(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "PromptConfig defaults"
    return "None" if value is None else str(value)


def _auto_help(name: str, text: str) -> dict[str, str]:
    """``text`` plus what ``auto`` (the default) becomes on each profile."""
    cpu, gpu = _shown(PROFILES["cpu"][name]), _shown(PROFILES["gpu"][name])
    return _help(f"{text} Default auto: {cpu} on a CPU, {gpu} on a GPU (see profile).")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One training run (see the field help, printed by ``envgym train --help``)."""

    # -- what to train on --------------------------------------------------------------------
    env_id: str = field(metadata=_help("Registered environment id to train on, e.g. envgym/FrozenLake-v0."))
    env_kwargs: Mapping[str, Any] = field(
        default_factory=dict, metadata=_help("Keyword arguments for envgym.make (the training tasks).")
    )
    eval_env_kwargs: Mapping[str, Any] | None = field(
        default=None,
        metadata=_help(
            "Keyword arguments of the held-out evaluation environment; None uses env_kwargs with "
            "split='test' (procedural environments draw their held-out tasks from it)."
        ),
    )
    reward_wrappers: Sequence[Any] | None = field(
        default=None,
        metadata=_help(
            "Reward wrappers stacked on every training and evaluation environment, first innermost, e.g. "
            "[{step_cost: {cost: -0.01, name: time_penalty_reward}}, {format: {tags: [think, action]}}] "
            "(envgym.rewards.wrap_rewards; names: outcome, format, invalid_action, step_cost, progress_shaping, "
            "meta_reasoning, verifier, rubric). Passed to envgym.make as env_kwargs['reward_wrappers']; None: "
            "the environment's own rewards."
        ),
    )
    model: str = field(
        default="smollm2",
        metadata=_help(
            "Policy model: 'smollm2' (the bundled SmolLM2-135M-Instruct), a local transformers folder, or "
            "'tiny' (a tiny randomly initialised model, for tests)."
        ),
    )
    # -- algorithm -----------------------------------------------------------------------------
    algo: str = field(
        default="grpo",
        metadata=_help(
            "Algorithm: grpo (group-normalised returns), dr_grpo (no std division, token-sum loss), rloo "
            "(leave-one-out baseline), ppo (value head + GAE), gigpo (grpo plus step-level groups of "
            "identical observations)."
        ),
    )
    reward_norm: str = field(
        default="sum",
        metadata=_help(
            "'sum': advantages from the episode return; 'gdpo': every reward component normalised within "
            "its group on its own, then summed (grpo, dr_grpo and gigpo only)."
        ),
    )
    profile: str = field(
        default=AUTO,
        metadata=_help(
            "Which sizes the auto settings (group_size, groups_per_update, max_turns, max_new_tokens, prompt, "
            "eval_episodes) take: cpu (small, a first update in minutes on a laptop), gpu (full size), or auto: "
            "gpu when training runs on CUDA or MPS, else cpu. A setting given explicitly always wins; the run "
            "folder's config.json records the resolved values."
        ),
    )
    group_size: int | str = field(
        default=AUTO,
        metadata=_auto_help("group_size", "Episodes per task seed (the group of group-relative methods)."),
    )
    groups_per_update: int | str = field(
        default=AUTO, metadata=_auto_help("groups_per_update", "Task seeds (groups) per update.")
    )
    updates: int = field(default=100, metadata=_help("Policy updates in the run (rollout + optimisation each)."))
    lr: float = field(default=1e-5, metadata=_help("AdamW learning rate."))
    weight_decay: float = field(default=0.0, metadata=_help("AdamW weight decay."))
    max_grad_norm: float | None = field(
        default=1.0, metadata=_help("Clip the gradient's global norm to this value; None: no clipping.")
    )
    micro_batch_size: int = field(
        default=8, metadata=_help("Sequences per forward/backward pass; gradients accumulate over micro-batches.")
    )
    ppo_epochs: int = field(default=1, metadata=_help("Passes over each update's batch (any algorithm)."))
    minibatches: int = field(default=1, metadata=_help("Optimizer steps per pass (the batch is split in this many)."))
    clip_low: float = field(default=0.2, metadata=_help("Lower ratio clip: ratios below 1 - clip_low are clipped."))
    clip_high: float = field(default=0.2, metadata=_help("Upper ratio clip: ratios above 1 + clip_high are clipped."))
    loss_aggregation: str | None = field(
        default=None,
        metadata=_help(
            "How token losses are averaged: token-mean, seq-mean-token-mean, seq-mean-token-sum or "
            "seq-mean-token-sum-norm (alias token-sum-norm: each sequence's sum divided by max_new_tokens); "
            "None: seq-mean-token-sum-norm for dr_grpo, token-mean otherwise."
        ),
    )
    kl_coef: float = field(
        default=0.0,
        metadata=_help("Weight of the KL penalty to the initial policy; 0 turns it off (no reference model)."),
    )
    kl_estimator: str = field(default="k3", metadata=_help("KL estimator: k1, k2 or k3."))
    entropy_coef: float = field(default=0.0, metadata=_help("Weight of the entropy bonus (0: off)."))
    vf_coef: float = field(default=0.5, metadata=_help("PPO: weight of the value loss."))
    value_clip: float | None = field(default=0.2, metadata=_help("PPO: value clipping range; None: no clipping."))
    gamma: float = field(default=1.0, metadata=_help("Discount over turns (PPO's GAE and GiGPO's step returns)."))
    lam: float = field(default=0.95, metadata=_help("PPO: GAE lambda."))
    step_weight: float = field(default=1.0, metadata=_help("GiGPO: weight of the step-level advantage."))
    dynamic_sampling: bool = field(
        default=False,
        metadata=_help(
            "Drop groups whose episodes all got the same return (no learning signal) and roll out fresh "
            "groups to refill the update, up to max_refill_rounds extra rounds."
        ),
    )
    max_refill_rounds: int = field(default=3, metadata=_help("Dynamic sampling: most extra rollout rounds per update."))
    collapse: str = field(
        default="warn",
        metadata=_help(
            "What to do when the policy collapses (collapse_patience updates in a row with no reward variance in "
            "90 percent of the groups and one reply in 90 percent of the turns): stop (checkpoint and end the run), warn, or off."
        ),
    )
    collapse_patience: int = field(default=5, metadata=_help("Collapsed updates in a row that make a collapse."))
    # -- episodes and curriculum --------------------------------------------------------------
    max_turns: int | str | None = field(
        default=AUTO,
        metadata=_auto_help("max_turns", "Harness turn limit per episode; None keeps the environment's own."),
    )
    horizon: Sequence[Sequence[int]] | None = field(
        default=None,
        metadata=_help(
            "Horizon curriculum: [[first_update, max_turns], ...] stages (first stage at update 0); "
            "overrides max_turns."
        ),
    )
    difficulty: Mapping[str, Any] | None = field(
        default=None,
        metadata=_help(
            "Difficulty ladder: {levels: [easiest, ...], kwarg: the env argument a plain level value sets "
            "(default 'difficulty'; a level may also be a mapping of env arguments or another env id), target: "
            "success rate above which the level goes up (default 0.7), or [low, high] to also go down below low, "
            "window: outcomes averaged (default 64), min_episodes: outcomes at a level before it may move "
            "(default 32)}."
        ),
    )
    task_pool: int | None = field(
        default=None,
        metadata=_help(
            "None: every update plays fresh task seeds. N: the training tasks are N fixed seeds, played in a seeded "
            "random order, a new order each pass over the pool (N >= groups_per_update: an update never plays a "
            "task twice)."
        ),
    )
    task_filter: bool = field(
        default=False,
        metadata=_help(
            "With task_pool: drop a task once its last task_filter_groups groups were all solved or all failed "
            "(no group-relative signal). The pool never shrinks below groups_per_update tasks: a task that would "
            "take it lower stays and is judged again after its next group."
        ),
    )
    task_filter_groups: int = field(
        default=2, metadata=_help("Task filter: the most recent groups of a task it is judged on (>= 1).")
    )
    prompt: PromptConfig | str = field(
        default=AUTO,
        metadata=_auto_help(
            "prompt",
            "Prompting options (history, last_k, system_prompt, action_tags...): see PromptConfig; a mapping "
            "sets the fields it names, the others keep PromptConfig's defaults (history=full).",
        ),
    )
    # -- generation ------------------------------------------------------------------------------
    temperature: float = field(
        default=1.0,
        metadata=_help(
            "Sampling temperature of training rollouts (> 0); the loss uses the policy at this temperature "
            "(log-probs of logits / temperature)."
        ),
    )
    top_p: float = field(
        default=1.0,
        metadata=_help(
            "Nucleus sampling mass of training rollouts, in (0, 1]; a sampling device, not part of the trained policy."
        ),
    )
    max_new_tokens: int | str = field(default=AUTO, metadata=_auto_help("max_new_tokens", "Most tokens per reply."))
    generation_batch_size: int | str = field(
        default=AUTO, metadata=_auto_help("generation_batch_size", "Most episodes per generation forward pass.")
    )
    generation_backend: str = field(
        default="hf",
        metadata=_help(
            "What generates the rollouts: hf (the live model in this process, through the hf agent) or vllm (a vLLM "
            "engine on the GPU beside the trained model, its weights synced after every update; needs a CUDA GPU and "
            "pip install 'envgym[vllm]')."
        ),
    )
    choices: str = field(
        default="free",
        metadata=_help(
            "What a reply may be: free (any text the model writes) or admissible (decoded within the environment's "
            "info['admissible_actions'] where it lists them: the model scores the valid actions and one is drawn, so "
            "no update is spent learning the reply format; evaluate such a policy with the hf agent's "
            "choices='admissible' too). hf generation only."
        ),
    )
    num_envs: int | None = field(
        default=None, metadata=_help("Environments played at once; None: every episode of a rollout round.")
    )
    rollout_backend: str = field(
        default="inproc",
        metadata=_help(
            "Where the environments step: inproc (this process), process (a worker pool), ray (Ray actors) or remote "
            "(an envgym serve server at rollout_url); the policy always generates in the trainer's process."
        ),
    )
    rollout_workers: int = field(
        default=1, metadata=_help("Worker processes or Ray actors of the process and ray rollout backends.")
    )
    rollout_url: str | None = field(
        default=None,
        metadata=_help(
            "The envgym serve server of rollout_backend remote (ws://HOST:PORT): the environments step there."
        ),
    )
    # -- model -----------------------------------------------------------------------------------
    lora: Mapping[str, Any] | None = field(
        default=None,
        metadata=_help(
            "None trains every weight; {r, alpha, dropout, target_modules} trains LoRA adapters (needs peft). "
            "Defaults: r=8, alpha=16, dropout=0.0, target_modules='all-linear'; top_layers=N puts adapters on the "
            "last N transformer layers only (the backward pass then stops there: faster on a CPU)."
        ),
    )
    gradient_checkpointing: bool = field(
        default=False, metadata=_help("Recompute activations in the backward pass (less memory, more time).")
    )
    share_prompts: bool = field(
        default=True,
        metadata=_help(
            "Forward a prompt that several sequences of a micro-batch share (a GRPO group's members) once, "
            "with their completions packed after it (same log-probs and gradients, fewer tokens)."
        ),
    )
    dtype: str = field(default="auto", metadata=_help("Weight dtype: auto (bf16 on CUDA, fp32 on CPU), float32, ..."))
    device: str = field(default="auto", metadata=_help("Device: auto (CUDA when available), cpu, cuda, cuda:N."))
    seed: int = field(default=0, metadata=_help("Run seed: task seeds, sampling and initialisation derive from it."))
    # -- evaluation, checkpoints, output -----------------------------------------------------
    eval_every: int = field(
        default=0, metadata=_help("Greedy evaluation on the held-out split every N updates (0: off).")
    )
    eval_episodes: int | str = field(
        default=AUTO, metadata=_auto_help("eval_episodes", "Episodes per evaluation (fixed seeds, one per task).")
    )
    checkpoint_every: int = field(default=10, metadata=_help("Checkpoint every N updates (0: only at the end)."))
    keep_checkpoints: int = field(default=2, metadata=_help("Newest checkpoints kept on disk (>= 1)."))
    out: str | None = field(
        default=None,
        metadata=_help(
            "Run folder; running again into it resumes. None: runs/train-ENV-ALGO-seedSEED (ENV: the id after its namespace, e.g. FrozenLake-v0)."
        ),
    )
    tensorboard: bool | None = field(
        default=None,
        metadata=_help(
            "Write TensorBoard event files: None when tensorboard is installed, True requires it, False off "
            "(with trackers unset; a trackers list names tensorboard or leaves it out instead)."
        ),
    )
    trackers: Sequence[str] | None = field(
        default=None,
        metadata=_help(
            "Experiment trackers that get every update's metrics besides metrics.jsonl, e.g. [tensorboard, mlflow]: "
            "tensorboard (event files in the run folder's tensorboard/) and mlflow (an MLflow run in a local store, "
            "the run folder's mlruns/, offline; pip install 'envgym[tracking]'). Each one named must be installed. "
            "None: tensorboard, as the tensorboard setting says."
        ),
    )

    # ------------------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id.strip():
            raise ConfigError(
                f"env_id must be a registered environment id such as 'envgym/FrozenLake-v0', got {self.env_id!r}."
            )
        for name in ("env_kwargs",):
            if not isinstance(getattr(self, name), Mapping):
                raise ConfigError(f"{name} must be a mapping of keyword arguments, got {getattr(self, name)!r}.")
        if self.eval_env_kwargs is not None and not isinstance(self.eval_env_kwargs, Mapping):
            raise ConfigError(f"eval_env_kwargs must be a mapping or None, got {self.eval_env_kwargs!r}.")
        object.__setattr__(self, "reward_wrappers", _check_reward_wrappers(self))
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError(f"model must be 'smollm2', 'tiny' or a local model folder, got {self.model!r}.")
        get_algorithm(self.algo)  # an unknown name is the first error
        _choice("reward_norm", self.reward_norm, REWARD_NORMS)
        _choice("collapse", self.collapse, COLLAPSE_ACTIONS)
        _int("collapse_patience", self.collapse_patience, minimum=1)
        _choice("profile", self.profile, PROFILE_NAMES)
        for name in (
            "group_size",
            "groups_per_update",
            "updates",
            "micro_batch_size",
            "ppo_epochs",
            "minibatches",
            "max_new_tokens",
            "generation_batch_size",
            "eval_episodes",
            "keep_checkpoints",
            "task_filter_groups",
            "rollout_workers",
        ):
            if name in AUTO_FIELDS and getattr(self, name) == AUTO:
                continue  # checked once resolved (the profile's values are valid)
            _int(name, getattr(self, name), minimum=1)
        for name in ("max_refill_rounds", "eval_every", "checkpoint_every"):
            _int(name, getattr(self, name), minimum=0)
        _int("seed", self.seed, minimum=None)
        if self.max_turns != AUTO:
            _int("max_turns", self.max_turns, minimum=1, optional=True)
        _int("num_envs", self.num_envs, minimum=1, optional=True)
        _int("task_pool", self.task_pool, minimum=1, optional=True)
        # Checks across settings read an auto setting as its smallest profile value (the
        # resolved config is checked again in full).
        sized = _Sized(self)
        if self.task_pool is not None and self.task_pool < sized.groups_per_update:
            raise ConfigError(
                f"task_pool ({self.task_pool}) must hold at least groups_per_update ({sized.groups_per_update}) tasks: "
                "the groups of an update play distinct tasks. Raise task_pool or lower groups_per_update."
            )
        _choice("generation_backend", self.generation_backend, ("hf", "vllm"))
        _choice("choices", self.choices, ("free", "admissible"))
        if self.choices != "free" and self.generation_backend != "hf":
            raise ConfigError(
                f"choices={self.choices!r} needs generation_backend='hf' (the vLLM backend decodes free text only)."
            )
        _choice("rollout_backend", self.rollout_backend, ROLLOUT_BACKENDS)
        if (self.rollout_backend == "remote") != (self.rollout_url is not None) or self.rollout_url == "":
            raise ConfigError(
                f"rollout_url names the envgym serve server of rollout_backend 'remote' (ws://HOST:PORT): give both "
                f"or neither, got rollout_backend={self.rollout_backend!r}, rollout_url={self.rollout_url!r}."
            )
        if self.rollout_backend == "inproc" and self.rollout_workers != 1:
            raise ConfigError(
                f"rollout_workers={self.rollout_workers} needs rollout_backend='process' or 'ray' (inproc steps the "
                "environments in this process)."
            )
        check_config(sized)  # type: ignore[arg-type]  # reads settings only
        if self.minibatches > sized.groups_per_update * sized.group_size:
            raise ConfigError(
                f"minibatches ({self.minibatches}) cannot exceed the episodes per update "
                f"({sized.groups_per_update * sized.group_size})."
            )
        _number("lr", self.lr, positive=True)
        _number("weight_decay", self.weight_decay)
        _number("max_grad_norm", self.max_grad_norm, positive=True, optional=True)
        _number("clip_low", self.clip_low)
        _number("clip_high", self.clip_high)
        if self.clip_low >= 1:
            raise ConfigError(
                f"clip_low must be in [0, 1) (ratios are clipped at 1 - clip_low), got {self.clip_low!r}."
            )
        _number("kl_coef", self.kl_coef)
        _number("entropy_coef", self.entropy_coef, signed=True)
        _number("vf_coef", self.vf_coef)
        _number("value_clip", self.value_clip, positive=True, optional=True)
        _number("step_weight", self.step_weight)
        for name in ("gamma", "lam"):
            value = getattr(self, name)
            _number(name, value)
            if value > 1:
                raise ConfigError(f"{name} must be in [0, 1], got {value!r}.")
        _number("temperature", self.temperature, positive=True)
        _number("top_p", self.top_p, positive=True)
        if self.top_p > 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r}.")
        if self.loss_aggregation is not None:
            _choice("loss_aggregation", self.loss_aggregation, AGGREGATIONS)
        _choice("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        _choice("dtype", self.dtype, DTYPES)
        if not isinstance(self.device, str) or not _DEVICE.match(self.device):
            raise ConfigError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', got {self.device!r}.")
        for name in ("dynamic_sampling", "gradient_checkpointing", "share_prompts", "task_filter"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}.")
        if self.tensorboard is not None and not isinstance(self.tensorboard, bool):
            raise ConfigError(f"tensorboard must be true, false or null, got {self.tensorboard!r}.")
        object.__setattr__(self, "trackers", _check_trackers(self.trackers, self.tensorboard))
        if self.out is not None and (not isinstance(self.out, str) or not self.out):
            raise ConfigError(f"out must be a folder path or None, got {self.out!r}.")
        if isinstance(self.prompt, Mapping):
            object.__setattr__(self, "prompt", PromptConfig.from_dict(self.prompt))
        if not isinstance(self.prompt, PromptConfig) and self.prompt != AUTO:
            raise ConfigError(f"prompt must be 'auto', a PromptConfig or a mapping of its fields, got {self.prompt!r}.")
        object.__setattr__(self, "horizon", _check_horizon(self.horizon))
        object.__setattr__(self, "lora", _check_lora(self.lora))
        object.__setattr__(self, "difficulty", _check_difficulty(self.difficulty, self.env_kwargs))
        if self.task_filter and self.task_pool is None:
            raise ConfigError(
                "task_filter drops tasks from a fixed pool; it needs task_pool=N (e.g. task_pool=64). Without a pool "
                "every update plays fresh seeds, and there is nothing to drop."
            )
        if self.task_filter and self.difficulty is not None:
            raise ConfigError(
                "task_filter judges each pool seed by its outcomes, but a difficulty ladder changes the task a seed "
                "gives; use one or the other."
            )

    # ------------------------------------------------------------------------------ device profile
    @property
    def auto_fields(self) -> list[str]:
        """The settings still ``"auto"`` (none once :meth:`resolve` has run)."""
        return [name for name in AUTO_FIELDS if _is_auto(getattr(self, name))]

    def resolve(self, device: str | None = None, *, recorded: Mapping[str, Any] | None = None) -> TrainConfig:
        """This config with every ``auto`` setting (:data:`AUTO_FIELDS`) given its profile's value
        (:data:`PROFILES`) and ``profile`` set to the profile used; explicit values stay.

        Args:
            device: what ``profile='auto'`` is decided on (default this config's ``device``;
                ``auto`` asks torch whether CUDA is available).
            recorded: the ``config.json`` of the run being resumed (:func:`recorded_config`): its
                profile and values fill the ``auto`` settings instead, so the run goes on as it began
                whatever the device (an explicit value that differs is refused as a changed config).
        """
        recorded = dict(recorded) if recorded is not None else {}
        profile = self.profile
        if profile == AUTO:
            old = recorded.get("profile")
            profile = old if old in PROFILES else device_profile(self.device if device is None else device)
        values: dict[str, Any] = {"profile": profile}
        for name in self.auto_fields:
            if name in recorded and not _is_auto(recorded[name]):
                values[name] = recorded[name]  # a run recorded before profiles existed has concrete values
            elif name == "prompt":
                values[name] = PromptConfig(**PROFILES[profile]["prompt"])
            else:
                values[name] = PROFILES[profile][name]
        return dataclasses.replace(self, **values)

    # ------------------------------------------------------------------------------ derived
    @property
    def episodes_per_update(self) -> int:
        """Episodes of an update (of a resolved config)."""
        return int(self.group_size) * int(self.groups_per_update)

    @property
    def aggregation(self) -> str:
        """The loss aggregation in use (``loss_aggregation`` or the algorithm's default)."""
        if self.loss_aggregation is not None:
            return self.loss_aggregation
        return get_algorithm(self.algo).default_aggregation

    def with_reward_wrappers(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """``kwargs`` plus ``reward_wrappers`` (when configured and ``kwargs`` names none itself):
        what ``envgym.make`` receives to build the environment with the configured wrappers."""
        out = dict(kwargs)
        if self.reward_wrappers and "reward_wrappers" not in out:
            out["reward_wrappers"] = json_safe(self.reward_wrappers)  # a copy: the config stays as it is
        return out

    @property
    def resolved_env_kwargs(self) -> dict[str, Any]:
        """The training environment's ``envgym.make`` arguments: ``env_kwargs`` with the reward wrappers."""
        return self.with_reward_wrappers(self.env_kwargs)

    @property
    def resolved_eval_env_kwargs(self) -> dict[str, Any]:
        """The evaluation environment's ``envgym.make`` arguments: ``eval_env_kwargs`` (default
        ``env_kwargs`` with ``split='test'``), with the reward wrappers."""
        if self.eval_env_kwargs is not None:
            return self.with_reward_wrappers(self.eval_env_kwargs)
        return self.with_reward_wrappers({**dict(self.env_kwargs), "split": "test"})

    def level_env(self, level: Any) -> tuple[str, dict[str, Any]]:
        """``(env_id, env_kwargs)`` of difficulty ``level``: a mapping of env arguments, another env
        id (``namespace/Name-vN``), or a value of the ladder's ``kwarg``; the kwargs carry the
        reward wrappers (a level that sets ``reward_wrappers`` itself keeps its own)."""
        kwargs = dict(self.env_kwargs)
        if isinstance(level, Mapping):
            return self.env_id, self.with_reward_wrappers({**kwargs, **dict(level)})
        if isinstance(level, str) and ENV_ID.match(level):
            return level, self.with_reward_wrappers(kwargs)
        kwarg = (self.difficulty or {}).get("kwarg", "difficulty")
        return self.env_id, self.with_reward_wrappers({**kwargs, kwarg: level})

    @property
    def out_dir(self) -> Path:
        """The run folder (``out`` or the default name)."""
        if self.out is not None:
            return Path(self.out).expanduser()
        name = self.env_id.split("/")[-1]
        return Path("runs") / f"train-{name}-{self.algo}-seed{self.seed}"

    # ------------------------------------------------------------------------------ (de)serialising
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that :meth:`from_dict` reads back to an equal config."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            data[f.name] = value.to_dict() if isinstance(value, PromptConfig) else json_safe(value)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Build a config from a mapping (a parsed file); unknown or missing keys raise :class:`ConfigError`."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a training config must be a mapping of field names to values, got {data!r}.")
        known = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in known:
                raise ConfigError(unknown_setting(str(key), known))
        if "env_id" not in data or data["env_id"] is None:
            raise ConfigError("a training config needs env_id (e.g. env_id: envgym/FrozenLake-v0, or --env).")
        values = dict(data)
        if isinstance(values.get("prompt"), Mapping):
            values["prompt"] = PromptConfig.from_dict(values["prompt"])
        try:
            return cls(**values)
        except TypeError as err:  # pragma: no cover - every field has a default but env_id
            raise ConfigError(f"bad training config: {err}") from err

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **overrides: Any) -> TrainConfig:
        """Read a YAML or JSON file; ``overrides`` (flags) win over the file's values."""
        return cls.from_dict({**read_config_file(path), **overrides})

    @classmethod
    def merged(cls, file: str | os.PathLike[str] | None = None, **overrides: Any) -> TrainConfig:
        """Defaults < ``file`` (optional) < ``overrides`` (``None`` overrides are ignored)."""
        data = read_config_file(file) if file is not None else {}
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(data)

    def changes_from(self, other: TrainConfig | Mapping[str, Any]) -> list[str]:
        """``"key: old -> new"`` lines for the fields that differ (``other`` is the old config)."""
        old = other.to_dict() if isinstance(other, TrainConfig) else dict(other)
        new = self.to_dict()
        # A setting added after ``other`` was recorded reads as its default there (an older run
        # resumes as long as it is left at the default).
        for f in dataclasses.fields(TrainConfig):
            if f.name not in old and f.name in new and f.default is not dataclasses.MISSING:
                old[f.name] = json_safe(f.default)
        return [
            f"{key}: {old.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}"
            for key in sorted(set(old) | set(new))
            if old.get(key, "<absent>") != new.get(key, "<absent>")
        ]


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The mapping in a YAML (``.yaml``/``.yml``) or JSON file; a clear :class:`ConfigError` otherwise."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"expected a YAML or JSON training config file, got {str(file)!r}, which is not a file.")
    text = file.read_text(encoding="utf-8")
    try:
        if file.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = load_yaml(text)
    except (ValueError, Exception) as err:  # yaml.YAMLError does not derive from ValueError
        raise ConfigError(f"{file} is not valid {'JSON' if file.suffix == '.json' else 'YAML'}: {err}") from err
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{file} must hold a mapping of setting names to values, got {type(data).__name__}.")
    return dict(data)


def device_profile(device: str) -> str:
    """The profile the ``auto`` settings take when training on ``device`` (a ``device`` setting):
    ``cpu`` for ``cpu``, ``gpu`` for ``cuda``/``cuda:N``/``mps``; ``auto`` is ``gpu`` when torch
    sees CUDA or MPS."""
    if device == "cpu":
        return "cpu"
    if device != AUTO:
        return "gpu"
    try:
        import torch
    except ImportError:  # the trainer will say torch is missing; nothing is sized for it
        return "cpu"
    mps = getattr(torch.backends, "mps", None)
    gpu = torch.cuda.is_available() or (mps is not None and mps.is_available())
    return "gpu" if gpu else "cpu"


def recorded_config(out: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``config.json`` of the run folder ``out`` when it holds a checkpoint to resume (the
    ``recorded`` argument of :meth:`TrainConfig.resolve`); ``None`` otherwise or when unreadable
    (opening the run folder reports that)."""
    folder = Path(out).expanduser()
    if latest_checkpoint(folder) is None:
        return None
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value == AUTO


class _Sized:
    """A read-only view of a config in which an ``auto`` setting reads as its smallest profile
    value (the cross-setting checks of a config not yet resolved)."""

    def __init__(self, config: TrainConfig) -> None:
        self._config = config

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._config, name)
        if name in AUTO_FIELDS and _is_auto(value):
            sizes = [profile[name] for profile in PROFILES.values() if isinstance(profile[name], int)]
            return min(sizes) if sizes else value
        return value


def field_help(name: str) -> str:
    """The help text of ``TrainConfig`` field ``name`` (the CLI's help)."""
    for f in dataclasses.fields(TrainConfig):
        if f.name == name:
            return str(f.metadata.get("help", ""))
    raise KeyError(name)


# -------------------------------------------------------------------------------------------- checks
def _choice(name: str, value: object, options: Sequence[str]) -> None:
    if not isinstance(value, str) or value not in options:
        raise ConfigError(
            f"{name} must be one of {', '.join(map(repr, options))}, got {value!r}.{suggest(str(value), options)}"
        )


def _int(name: str, value: object, *, minimum: int | None, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        expected = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise ConfigError(f"{name} must be {expected}{' or None' if optional else ''}, got {value!r}.")


def _number(name: str, value: object, *, positive: bool = False, signed: bool = False, optional: bool = False) -> None:
    if value is None and optional:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and positive:
        ok = value > 0
    elif ok and not signed:
        ok = value >= 0
    if not ok:
        expected = "a number > 0" if positive else ("a finite number" if signed else "a number >= 0")
        quoted = ""
        if isinstance(value, str):
            try:
                float(value)
                quoted = " (a string: write the number without quotes)"
            except ValueError:
                pass
        raise ConfigError(f"{name} must be {expected}{' or None' if optional else ''}, got {value!r}{quoted}.")


def _check_reward_wrappers(config: TrainConfig) -> list[Any] | None:
    """The reward wrapper specs as plain data, checked without an environment (names, option
    names, rubric grammar; the values are checked when the trainer first makes the env)."""
    specs = config.reward_wrappers
    if specs is None:
        return None
    check_reward_wrappers(specs)  # RubricError, a ConfigError naming the spec
    for name in ("env_kwargs", "eval_env_kwargs"):
        if "reward_wrappers" in (getattr(config, name) or {}):
            raise ConfigError(
                f"reward_wrappers is set both as a setting and in {name}; give it once, as the reward_wrappers setting."
            )
    if not _plain_data(specs):
        raise ConfigError(
            f"reward_wrappers must be plain data (names, numbers, strings, lists, mappings) to be saved with the "
            f"run and sent to worker processes, got {specs!r}."
        )
    return json_safe(specs)  # tuples to lists: what to_dict writes and from_dict reads back


def _plain_data(value: Any) -> bool:
    """Whether ``value`` is JSON data (tuples allowed): what a run folder can record and replay."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain_data(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain_data(v) for v in value)
    return False


def _check_trackers(trackers: Any, tensorboard: bool | None) -> tuple[str, ...] | None:
    """``trackers`` as a tuple of known tracker names, consistent with the ``tensorboard`` setting."""
    if trackers is None:
        return None
    if isinstance(trackers, str):
        trackers = [trackers]  # a single name, as a flag or a YAML scalar gives it
    if not isinstance(trackers, Sequence) or not all(isinstance(name, str) for name in trackers):
        raise ConfigError(f"trackers must be a list of tracker names such as [tensorboard, mlflow], got {trackers!r}.")
    for name in trackers:
        if name not in TRACKERS:
            raise ConfigError(
                f"unknown tracker {name!r} in trackers; known: {', '.join(TRACKERS)}.{suggest(name, TRACKERS)}"
            )
    if len(set(trackers)) != len(trackers):
        raise ConfigError(f"trackers names a tracker twice: {list(trackers)!r}.")
    if tensorboard is False and "tensorboard" in trackers:
        raise ConfigError("tensorboard=false contradicts trackers, which names tensorboard; give one of them.")
    if tensorboard is True and "tensorboard" not in trackers:
        raise ConfigError(
            f"tensorboard=true but trackers ({', '.join(trackers) or 'empty'}) leaves tensorboard out; add it to "
            "trackers (e.g. [tensorboard, mlflow])."
        )
    return tuple(trackers)


def _check_horizon(stages: Any) -> tuple[tuple[int, int], ...] | None:
    if stages is None:
        return None
    example = "[[0, 2], [20, 4], [50, 8]]"
    if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence) or not stages:
        raise ConfigError(
            f"horizon must be a list of [first_update, max_turns] stages such as {example}, got {stages!r}."
        )
    out = []
    for stage in stages:
        if (
            isinstance(stage, (str, bytes))
            or not isinstance(stage, Sequence)
            or len(stage) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) for v in stage)
        ):
            raise ConfigError(f"each horizon stage must be [first_update, max_turns] (two integers), got {stage!r}.")
        out.append((int(stage[0]), int(stage[1])))
    starts = [s for s, _ in out]
    if starts[0] != 0 or starts != sorted(set(starts)) or any(t < 1 for _, t in out):
        raise ConfigError(
            f"horizon stages must start at update 0, in increasing order, with max_turns >= 1, like {example}; "
            f"got {stages!r}."
        )
    return tuple(out)


def _check_lora(lora: Any) -> dict[str, Any] | None:
    if lora is None:
        return None
    if not isinstance(lora, Mapping):
        raise ConfigError(f"lora must be None or a mapping with keys {', '.join(LORA_KEYS)}, got {lora!r}.")
    for key in lora:
        if key not in LORA_KEYS:
            raise ConfigError(f"unknown lora key {key!r}.{suggest(str(key), LORA_KEYS)} Known: {', '.join(LORA_KEYS)}.")
    out = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": "all-linear", **dict(lora)}
    _int("lora.r", out["r"], minimum=1)
    _number("lora.alpha", out["alpha"], positive=True)
    _number("lora.dropout", out["dropout"])
    if out["dropout"] >= 1:
        raise ConfigError(f"lora.dropout must be in [0, 1), got {out['dropout']!r}.")
    targets = out["target_modules"]
    if isinstance(targets, str):
        pass
    elif isinstance(targets, Sequence) and targets and all(isinstance(t, str) and t for t in targets):
        out["target_modules"] = list(targets)
    else:
        raise ConfigError(
            f"lora.target_modules must be 'all-linear' or a list of module names such as ['q_proj', 'v_proj'], "
            f"got {targets!r}."
        )
    top = out.get("top_layers")
    if top is not None:
        _int("lora.top_layers", top, minimum=1)
    return out


def _check_difficulty(ladder: Any, env_kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    if ladder is None:
        return None
    if not isinstance(ladder, Mapping):
        raise ConfigError(
            f"difficulty must be None or a mapping with keys {', '.join(DIFFICULTY_KEYS)}, got {ladder!r}."
        )
    for key in ladder:
        if key not in DIFFICULTY_KEYS:
            raise ConfigError(
                f"unknown difficulty key {key!r}.{suggest(str(key), DIFFICULTY_KEYS)} Known: {', '.join(DIFFICULTY_KEYS)}."
            )
    out = {"kwarg": "difficulty", "target": 0.7, "window": 64, "min_episodes": 32, **dict(ladder)}
    levels = out.get("levels")
    if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence) or len(levels) < 2:
        raise ConfigError(f"difficulty.levels must list at least two levels, easiest first, got {levels!r}.")
    out["levels"] = list(levels)
    if not isinstance(out["kwarg"], str) or not out["kwarg"].isidentifier():
        raise ConfigError(f"difficulty.kwarg must name an environment argument, got {out['kwarg']!r}.")
    if out["kwarg"] in env_kwargs and not all(isinstance(level, Mapping) for level in levels):
        raise ConfigError(
            f"env_kwargs sets {out['kwarg']!r}, which the difficulty ladder controls; remove it from env_kwargs."
        )
    target = out["target"]
    rates = list(target) if isinstance(target, Sequence) and not isinstance(target, (str, bytes)) else [target]
    if (
        len(rates) not in (1, 2)
        or any(isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r <= 1 for r in rates)
        or (len(rates) == 2 and rates[0] > rates[1])
    ):
        raise ConfigError(f"difficulty.target must be a success rate in [0, 1] or a band [low, high], got {target!r}.")
    out["target"] = rates if len(rates) == 2 else rates[0]
    _int("difficulty.window", out["window"], minimum=1)
    _int("difficulty.min_episodes", out["min_episodes"], minimum=1)
    if out["min_episodes"] > out["window"]:
        raise ConfigError(
            f"difficulty.min_episodes ({out['min_episodes']}) cannot exceed difficulty.window ({out['window']})."
        )
    try:
        json.dumps(out["levels"])
    except (TypeError, ValueError) as err:
        raise ConfigError(f"difficulty.levels must be JSON values, got {levels!r}.") from err
    return out
