"""Data-parallel training through torchrun, on the CPU (Gloo): ``python -m torch.distributed.run
--nproc_per_node=2 -m envgym.cli train ...`` with the tiny model for 2 updates.

Slow (about 30 s: two processes each import torch and transformers): marked ``slow``, run in CI.

Each rank plays its half of every update's groups (disjoint task seeds), the gradients are
all-reduced by DistributedDataParallel, and only rank 0 writes metrics, checkpoints and the
report. With one micro-batch per rank (``micro_batch_size`` = a rank's sequences) the gradient
sums are the very ones a single process makes over the same groups, so the run is checked to be
*exactly* the one-process run: the same metrics, bit-identical weights on both ranks and in the
one-process run.

The subprocesses learn the test environment and report their weights through a
``sitecustomize`` module put on ``PYTHONPATH``: it imports ``test_trainer_envs`` (which registers
``envgymtest/Vowel-v0``) and wraps ``Trainer.train`` to write a checksum of the trainable
parameters per rank.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the Gloo backend is not available", allow_module_level=True)
import test_trainer_loop  # noqa: F401  (skips without the tokenizer; registers the test environment)

from envgym.trainer import TrainConfig, Trainer
from envgym.trainer.metrics import comparable, read_metrics

TESTS = Path(__file__).resolve().parent

HOOK = """
import hashlib, os, sys
sys.path.insert(0, {tests!r})
if os.environ.get("RANK") is not None:  # the torchrun workers, not the launcher
    import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)
    from envgym.trainer import loop

    _train = loop.Trainer.train

    def train(self):
        result = _train(self)
        digest = hashlib.sha256()
        for name, value in sorted(self.policy.named_trainable_parameters().items()):
            digest.update(name.encode())
            digest.update(value.detach().cpu().contiguous().numpy().tobytes())
        with open(os.path.join({folder!r}, "rank%d" % self.dist.rank), "w") as f:
            f.write(digest.hexdigest())
        return result

    loop.Trainer.train = train
"""


def checksum(named: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for name, value in sorted(named.items()):
        digest.update(name.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@pytest.mark.slow
def test_torchrun_two_ranks_equal_one_process(tmp_path: Path) -> None:
    hook, sums, out = tmp_path / "hook", tmp_path / "checksums", tmp_path / "ddp"
    hook.mkdir()
    sums.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK.format(tests=str(TESTS), folder=str(sums)))
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
        "4",
        "--max-new-tokens",
        "1",
        "--max-turns",
        "2",
        "--updates",
        "2",
        "--out",
        str(out),
        "--set",
        'prompt={"system_prompt": "", "action_tags": []}',
        "--set",
        "tensorboard=false",
        "--set",
        "lr=0.01",
        "--set",
        "micro_batch_size=8",  # a rank's 2 groups x 4 episodes: one micro-batch per rank
    ]
    env = {**os.environ, "PYTHONPATH": str(hook), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    proc = subprocess.run(
        [*command, "-m", "envgym.cli", "train", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 data-parallel processes" in proc.stderr and proc.stderr.count("update 2/2") == 1  # rank 0 prints

    # Rank 0 wrote the metrics (reduced over both ranks), the checkpoint and the report.
    rows = read_metrics(out)
    assert [r["update"] for r in rows] == [1, 2]
    assert all(r["batch/episodes"] == 16 and r["episode/count"] == 16 and r["tokens"] == 16 for r in rows)
    assert (out / "checkpoints" / "update-000002" / "COMPLETE").is_file() and (out / "report.md").is_file()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["sessions"][-1]["world_size"] == 2
    # Each rank played its own groups: seeds 0-1 and 2-3 in update 1, 4-5 and 6-7 in update 2.
    for update, halves in ((1, ([0, 1], [2, 3])), (2, ([4, 5], [6, 7]))):
        for rank, seeds in enumerate(halves):
            file = out / "rollouts" / f"update-{update:06d}" / f"rank-{rank}" / "episodes.jsonl"
            assert sorted({json.loads(line)["seed"] for line in file.read_text().splitlines()}) == seeds

    # The all-reduce kept the ranks in sync: the same weights, bit for bit.
    rank0, rank1 = (sums / "rank0").read_text(), (sums / "rank1").read_text()
    assert rank0 == rank1

    # And the run is the one-process run over the same groups.
    settings = json.loads((out / "config.json").read_text())
    settings["out"] = str(tmp_path / "single")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = Trainer(TrainConfig.from_dict(settings))
        single.train()
    finally:
        torch.set_num_threads(threads)
    assert [comparable(r) for r in read_metrics(tmp_path / "single")] == [comparable(r) for r in rows]
    assert checksum(single.policy.named_trainable_parameters()) == rank0
