"""Stopping a training run keeps the work: a stop request (the first Ctrl-C of ``envgym train``)
abandons or finishes the update under way, checkpoints the last completed one and writes
``report.md``; resuming then gives exactly the run that was never stopped. A second Ctrl-C aborts
at once. One test sends a real SIGINT to an ``envgym train`` subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
from test_trainer_loop import _load_final, config

from envgym.cli import app
from envgym.trainer import Trainer, train
from envgym.trainer.checkpoint import list_checkpoints
from envgym.trainer.loop import stop_on_sigint
from envgym.trainer.metrics import comparable, read_metrics

TESTS = Path(__file__).resolve().parent
#: 3 updates (stops come at update 3), no periodic checkpoint: everything a stop keeps comes from
#: the stop itself.
SETTINGS: dict[str, Any] = {"updates": 3, "checkpoint_every": 0, "ppo_epochs": 2, "lr": 1e-2}


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Any:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The uninterrupted run: its folder and final weights."""
    folder = tmp_path_factory.mktemp("straight")
    trainer = Trainer(config(folder, **SETTINGS))
    trainer.train()
    weights = {n: p.detach().clone() for n, p in trainer.policy.named_trainable_parameters().items()}
    return folder / "run", weights


def _same_as_straight(folder: Path, straight: tuple[Path, dict[str, Any]]) -> None:
    straight_run, weights = straight
    assert [comparable(r) for r in read_metrics(folder / "run")] == [comparable(r) for r in read_metrics(straight_run)]
    final = _load_final(folder, SETTINGS)
    # Exact: the resumed run replays the same float operations on the same inputs on this machine.
    for name, value in weights.items():
        assert torch.equal(value, final[name]), name


@pytest.mark.parametrize("when", ["during rollout", "after rollout", "between updates"])
def test_stop_request_checkpoints_the_last_update_and_resumes_exactly(
    tmp_path: Path, straight: tuple[Path, dict[str, Any]], when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer: Trainer

    def on_event(message: str) -> None:
        if when == "during rollout" and message.startswith("update 3: rollout"):
            trainer.request_stop()  # the agent's next call ends the rollout

    def on_update(row: dict[str, Any]) -> None:
        if when == "between updates" and row["update"] == 2:
            trainer.request_stop()

    if when == "after rollout":  # every episode played, the optimisation not started
        real = Trainer._rollout

        def rollout_then_stop(self: Trainer, update: int, *args: Any) -> Any:
            out = real(self, update, *args)
            if update == 3:
                self.request_stop()
            return out

        monkeypatch.setattr(Trainer, "_rollout", rollout_then_stop)
    trainer = Trainer(config(tmp_path, **SETTINGS), on_event=on_event, on_update=on_update)
    result = trainer.train()
    run = tmp_path / "run"
    assert result.stopped and result.final_update == 2
    assert result.abandoned == (None if when == "between updates" else 3)
    assert [u for u, _ in list_checkpoints(run)] == [2] and result.checkpoint == run / "checkpoints" / "update-000002"
    assert [r["update"] for r in read_metrics(run)] == [1, 2]
    assert not (run / "rollouts" / "update-000003").exists()  # the abandoned rollout left nothing behind
    assert result.report is not None and "| `episode/return` |" in result.report.read_text()
    # The checkpoint holds the task seeds as they were after update 2, not those update 3 drew.
    assert json.loads((result.checkpoint / "state.json").read_text())["next_seed"] == 8

    monkeypatch.undo()
    resumed = train(config(tmp_path, **SETTINGS))
    assert (resumed.start_update, resumed.final_update, resumed.stopped) == (2, 3, False)
    _same_as_straight(tmp_path, straight)


def test_second_sigint_aborts_at_once(tmp_path: Path) -> None:
    trainer = Trainer(config(tmp_path))
    notified: list[bool] = []
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), stop_on_sigint(trainer, notify=lambda: notified.append(True)):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs between bytecodes
        assert trainer.stop_requested and notified == [True]  # the first one only asks
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
        pytest.fail("the second SIGINT should have raised KeyboardInterrupt")
    assert signal.getsignal(signal.SIGINT) is before


#: ``envgym train`` with the test environment registered (it lives in this tests folder).
CLI = (
    "import sys; sys.path.insert(0, {tests!r}); import test_trainer_envs; from envgym.cli import main; "
    "sys.argv = ['envgym', 'train', *{args!r}]; main()"
)


def test_sigint_to_envgym_train_stops_cleanly_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [
        "--env",
        "envgymtest/Vowel-v0",
        "--model",
        "tiny",
        "--device",
        "cpu",
        "--group-size",
        "4",
        "--groups",
        "2",
        "--max-new-tokens",
        "1",
        "--max-turns",
        "2",
        "--updates",
        "200",
        "--out",
        str(out),
        "--set",
        'prompt={"system_prompt": "", "action_tags": []}',
        "--set",
        "tensorboard=false",
        "--set",
        "lr=0.01",
        "--set",
        "checkpoint_every=0",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI.format(tests=str(TESTS), args=args)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not read_metrics(out) and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert read_metrics(out), f"no update finished: {stderr.read_text()[-2000:]}"
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = stderr.read_text()
    assert proc.returncode == 130, text[-2000:]
    assert "stopping:" in text and "stopped. Kept up to update" in text
    assert f"envgym train --config {out / 'config.json'} --out {out}" in " ".join(text.split())
    assert "Traceback" not in text
    done = [r["update"] for r in read_metrics(out)]
    stopped_at = done[-1]
    assert done == list(range(1, stopped_at + 1)) and stopped_at < 200
    assert [u for u, _ in list_checkpoints(out)] == [stopped_at]  # checkpoint_every=0: the stop wrote it
    assert (out / "report.md").is_file()

    # Resume one update further, in this process; it equals a run that was never interrupted.
    more = [a if a != "200" else str(stopped_at + 1) for a in args]
    resume = CliRunner().invoke(app, ["train", *more])
    assert resume.exit_code == 0, resume.output
    assert "resuming" in resume.stderr
    straight = tmp_path / "straight"
    settings = json.loads((out / "config.json").read_text())
    settings.update(out=str(straight), updates=stopped_at + 1)
    train(settings)
    rows = [comparable(r) for r in read_metrics(out)]
    assert [r["update"] for r in rows] == list(range(1, stopped_at + 2))
    assert rows == [comparable(r) for r in read_metrics(straight)]
