"""A suite's ``prompt:`` block: parsed and validated, part of the suite hash, applied to every entry's
run, and held against bundles by the leaderboard (a changed block is another suite)."""

from __future__ import annotations

import copy
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from envgym.bench.run import run_suite
from envgym.bench.suite import load_suite, parse_suite
from envgym.errors import ConfigError
from envgym.rollout import Agent, AgentInput, AgentOutput, PromptConfig

BASE = """\
name: ptest
version: 1
description: prompt block tests
defaults: {episodes: 2, seed: 3, split: train, max_turns: 3}
entries:
  - name: lake
    env: envgym/FrozenLake-v0
  - name: boxes
    env: envgym/Sokoban-v0
    kwargs: {size: 6, boxes: 1}
    max_turns: 2
"""
PROMPT = "prompt: {history: last_k, last_k: 2, max_new_tokens: 48, action_tags: [move]}\n"


def suite_data(prompt: str = "") -> dict:
    return yaml.safe_load(BASE + prompt)


def write_suite(folder: Path, prompt: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ptest-v1.yaml"
    path.write_text(BASE + prompt, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ parsing and hash
def test_prompt_block_is_kept_as_written_and_builds_the_run_prompt() -> None:
    suite = parse_suite(suite_data(PROMPT), check_envs=False)
    assert suite.prompt == {"history": "last_k", "last_k": 2, "max_new_tokens": 48, "action_tags": ["move"]}
    assert suite.prompt_config == PromptConfig(history="last_k", last_k=2, max_new_tokens=48, action_tags=("move",))
    assert suite.to_dict()["prompt"] == suite.prompt
    assert suite.summary()["prompt"] == suite.prompt
    # The resolved suite (a run's suite.yaml) reads back to the same suite.
    again = parse_suite(yaml.safe_load(suite.to_yaml()), check_envs=False)
    assert again.prompt == suite.prompt and again.sha256 == suite.sha256

    plain = parse_suite(suite_data(), check_envs=False)
    assert plain.prompt == {} and "prompt" not in plain.to_dict()
    assert plain.prompt_config == PromptConfig()


def test_the_prompt_block_is_part_of_the_suite_hash() -> None:
    plain = parse_suite(suite_data(), check_envs=False).sha256
    with_block = parse_suite(suite_data(PROMPT), check_envs=False).sha256
    other = parse_suite(suite_data(PROMPT.replace("48", "64")), check_envs=False).sha256
    empty = parse_suite(suite_data("prompt: {}\n"), check_envs=False).sha256
    assert len({plain, with_block, other}) == 3
    assert empty == plain  # an empty block changes nothing, so it is not another suite
    reordered = parse_suite(
        suite_data("prompt: {action_tags: [move], max_new_tokens: 48, last_k: 2, history: last_k}\n")
    )
    assert reordered.sha256 == with_block  # the hash is canonical: key order does not matter


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("prompt: {max_new_token: 4}", r"field 'prompt': unknown prompt config key 'max_new_token'.*'max_new_tokens'"),
        ("prompt: {histroy: none}", r"unknown prompt config key 'histroy'.*Did you mean 'history'"),
        ("prompt: {history: last-k}", r"field 'prompt': history must be one of .*Did you mean 'last_k'"),
        ("prompt: {max_new_tokens: 0}", r"field 'prompt': max_new_tokens must be an integer >= 1"),
        ("prompt: {stop_at_action: maybe}", r"stop_at_action must be true or false"),
        ("prompt: {max_turns: 5}", r"field 'prompt': 'max_turns' cannot be set here; use the suite's defaults"),
        ("prompt: [history, none]", r"field 'prompt': expected a mapping of prompt settings"),
        ("promt: {history: none}", r"unknown field 'promt'.*Did you mean 'prompt'"),
    ],
)
def test_bad_prompt_blocks_name_the_field(block: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_suite(suite_data(block + "\n"), source="ptest-v1.yaml", check_envs=False)


def test_bundled_suites_carry_reply_limits() -> None:
    core = load_suite("core-v1", check_envs=False)
    assert core.prompt_config.max_new_tokens is not None and core.prompt_config.stop_at_action
    for suite_id in ("games-v1", "household-v1"):
        assert load_suite(suite_id, check_envs=False).prompt_config.max_new_tokens is not None


# ------------------------------------------------------------------------------ applied to runs
class RecordingChatAgent(Agent):
    """A chat agent that answers ``<move>up</move>`` in 5 tokens and records every input."""

    name = "recording-chat"
    chat = True

    def __init__(self) -> None:
        self.inputs: list[AgentInput] = []

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        self.inputs.extend(batch)
        return [AgentOutput("<move>up</move>", token_ids=[1, 2, 3, 4, 5], logprobs=[-1.0] * 5) for _ in batch]


def test_the_block_is_applied_to_every_entry(tmp_path: Path) -> None:
    path = write_suite(tmp_path / "suites", PROMPT)
    agent = RecordingChatAgent()
    run = run_suite(path, "random", agent_object=agent, out=tmp_path / "run", num_envs=2)
    expected = PromptConfig(history="last_k", last_k=2, max_new_tokens=48, action_tags=("move",)).to_dict()
    for name in ("lake", "boxes"):
        config = json.loads((run.entry_dir(name) / "config.json").read_text())
        assert config["prompt"] == expected
    assert agent.inputs and all(i.stop == ("</move>",) and i.max_new_tokens == 48 for i in agent.inputs)
    # The history policy is the suite's: at most the system prompt, 2 earlier turns and the latest observation.
    assert max(len(i.messages) for i in agent.inputs) == 1 + 2 * 2 + 1
    turns = [t for ts in run.per_entry().values() for traj in ts for t in traj.turns]
    assert turns and all(t.format_ok and t.action == "up" for t in turns)
    assert run.meta["suite"]["sha256"] == load_suite(path, check_envs=False).sha256


# ------------------------------------------------------------------------------ the leaderboard
def test_leaderboard_refuses_a_bundle_run_with_another_prompt_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envgym.leaderboard.bundle import make_bundle
    from envgym.leaderboard.verify import VerificationError, verify_bundle

    suites = tmp_path / "suites"
    monkeypatch.setenv("ENVGYM_BENCHMARKS", str(suites))
    write_suite(suites, PROMPT)
    run = run_suite("ptest-v1", "random", out=tmp_path / "run", num_envs=2)
    bundle = make_bundle(run.path, name="random")
    verified = verify_bundle(bundle)  # the installed suite is the one that was run
    assert verified.suite.prompt == suite_data(PROMPT)["prompt"]

    # The installed suite's block changes (say its reply cap): the run was another suite.
    write_suite(suites, PROMPT.replace("48", "64"))
    with pytest.raises(VerificationError, match=r"has sha256 .* the run used another version of the suite"):
        verify_bundle(bundle)

    # A bundle that keeps the installed hash but carries another block is caught too.
    write_suite(suites, PROMPT)
    forged = copy.deepcopy(bundle)
    forged.manifest["suite_spec"]["prompt"]["max_new_tokens"] = 4096
    forged.rehash()
    with pytest.raises(VerificationError, match="the suite copy in the bundle differs from the installed suite"):
        verify_bundle(forged)


def test_a_finished_run_is_left_as_it_is_and_bundles_identically(tmp_path: Path) -> None:
    """Running a finished bench run again changes no file, so bundling it again gives the same
    content hash (the leaderboard then answers 'already stored' instead of adding a duplicate)."""
    from envgym.leaderboard.bundle import bundle_bytes, make_bundle

    path = write_suite(tmp_path / "suites", PROMPT)
    out = tmp_path / "run"
    run_suite(path, "random", out=out, num_envs=2)
    # The .lock files name the last writer's pid (they are not part of the run's content).
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lock"}
    first = make_bundle(out, name="random")
    run_suite(path, "random", out=out, num_envs=2)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lock"} == files
    second = make_bundle(out, name="random")
    assert second.content_hash == first.content_hash and bundle_bytes(second) == bundle_bytes(first)
    assert first.manifest["bundled_at"] == max(e["finished_at"] for e in _episodes(out))


def _episodes(run_dir: Path) -> list[dict]:
    return [json.loads(line) for f in run_dir.glob("entries/*/episodes.jsonl") for line in f.read_text().splitlines()]


def test_suite_file_example_in_the_docstring_parses() -> None:
    from envgym.bench import suite as module

    doc = module.__doc__ or ""
    block = doc.split(".. code-block:: yaml", 1)[1].split("\n\n", 2)[1]
    data = yaml.safe_load(textwrap.dedent(block))
    parsed = parse_suite(data, check_envs=False)
    assert parsed.prompt_config.max_new_tokens == 48 and parsed.prompt_config.history == "last_k"
