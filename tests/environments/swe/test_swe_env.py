"""envgym/SWE-v0 and envgym/SWE-Tools-v0: the bash and tool interfaces, grading, oracle and do-nothing agents.

Episodes run for real in the bwrap sandbox over the shipped manifest and the fetched libraries
(both installed by scripts/setup.sh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from envgym.agents.solvers.swe import Solver, fix_command
from envgym.environments.swe.env import STRUCTURED_TOOLS, SWEEnv, format_output
from envgym.environments.swe.libraries import source_tree
from envgym.environments.swe.tasks import select_tasks

import envgym
from envgym.errors import InvalidKwargsError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def env() -> SWEEnv:
    try:
        made = envgym.make("envgym/SWE-v0", split="test").unwrapped
    except envgym.errors.MissingDependencyError as err:
        pytest.skip(str(err))
    yield made
    made.close()


def _play(env: SWEEnv, policy, task_id: str, limit: int = 6) -> tuple[float, dict, str]:
    obs, info = env.reset(seed=0, options={"task_id": task_id})
    for _ in range(limit):
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            return reward, info, obs
    raise AssertionError("the episode did not end")


class _Submit:
    def act(self, observation: str, info: dict) -> str:
        return "submit"


def call(name: str, **arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def _sample(split: str, n: int) -> list[str]:
    tasks = select_tasks(split)
    by_lib: dict[str, list[str]] = {}
    for t in tasks:
        by_lib.setdefault(t.library, []).append(t.id)
    picked = [ids[0] for ids in by_lib.values()]  # one task of every library in the split first
    rest = [t.id for t in tasks if t.id not in picked]
    return (picked + rest[:: max(1, len(rest) // n)])[:n]


def test_reset_shows_the_problem_and_the_workspace_has_the_bug_but_no_history(env: SWEEnv) -> None:
    obs, info = env.reset(seed=3)
    task = env.current
    assert task is not None and info["task"]["id"] == task.id and info["task"]["split"] == "test"
    assert task.problem_statement in obs and "submit" in obs
    assert info["task"]["fail_to_pass"] == list(task.fail_to_pass)
    # the agent sees neither the fix nor where the bug is
    assert task.original not in obs and task.file not in obs and str(task.line) not in info["task"]["id"]
    out, *_ = env.step("ls -a; test -e .git && echo HAS_GIT; find / -name tasks.json.gz 2>/dev/null | head -1")
    assert "HAS_GIT" not in out and "tasks.json.gz" not in out
    buggy, *_ = env.step(f"sed -n '{task.line}p' {task.file}")
    assert task.mutated.splitlines()[0].strip() in buggy
    again, info2 = env.reset(seed=3)
    assert again == obs and info2 == info


def test_commands_keep_whitespace_and_long_output_is_cut_in_the_middle(env: SWEEnv) -> None:
    env.reset(seed=1)
    obs, _reward, _terminated, _truncated, info = env.step("```bash\nprintf 'a\\n  b\\n'\nexit 3\n```")
    assert obs == "<returncode>3</returncode>\n<output>\na\n  b\n</output>" and info["action_valid"]
    obs, *_ = env.step("<action>python3 -c \"print('x' * 30000)\"</action>")
    assert "characters elided" in obs and len(obs) < 10_500 and obs.startswith("<returncode>0</returncode>")
    assert format_output("y" * 1000, 0, 400).count("y") == 400


@pytest.mark.parametrize("bad", ["", "   ", "x" * 20_001, "ls\x00", "```bash\n\n```", None, 7])
def test_malformed_commands_are_invalid_steps_that_keep_the_state(env: SWEEnv, bad: object) -> None:
    env.reset(seed=2)
    before = env._observe()
    obs, _reward, terminated, _truncated, info = env.step(bad)
    assert not info["action_valid"] and not terminated and env._observe() == before
    assert obs.startswith("Invalid action")


def test_do_nothing_scores_zero_and_grading_reports_the_failing_tests(env: SWEEnv) -> None:
    for task_id in _sample("test", 4):
        reward, info, obs = _play(env, _Submit(), task_id)
        task = env.current
        assert reward == 0.0 and info["success"] is False and info["termination_reason"] == "failure"
        components = info["reward_components"]
        assert components["resolved_reward"] == 0.0 and components["f2p_fraction_reward"] < 1.0
        assert components["p2p_broken_reward"] == 0.0  # the bug breaks only FAIL_TO_PASS
        assert info["grading"]["report_ok"] and set(info["grading"]["fail_to_pass"]) == set(task.fail_to_pass)
        assert "NOT RESOLVED" in obs
        assert info["model_patch"] == ""  # nothing changed: SWE-bench's empty model_patch


def test_oracle_resolves_a_sample_of_test_tasks_through_bash(env: SWEEnv) -> None:
    for task_id in _sample("test", 6):
        reward, info, obs = _play(env, Solver("envgym/SWE-v0", 0), task_id)
        assert reward == 1.0 and info["success"] and info["termination_reason"] == "success", (task_id, obs)
        assert info["reward_components"] == {
            "resolved_reward": 1.0,
            "f2p_fraction_reward": 1.0,
            "p2p_broken_reward": 0.0,
            "invalid_action_reward": 0.0,
            "step_cost_reward": 0.0,
        }


def _start_tree(task: Any, dest: Path) -> Path:
    """The task's start as reset lays it out: the pristine library with the bug written in."""
    tree = dest / "start"
    shutil.copytree(source_tree(task.lib), tree, symlinks=True)
    (tree / task.file).write_bytes(task.mutated_source())
    return tree


def _apply(patch: str, tree: Path) -> None:
    (tree.parent / "model.patch").write_text(patch)
    done = subprocess.run(
        ["git", "apply", "--verbose", str(tree.parent / "model.patch")], cwd=tree, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()


def test_the_final_step_records_a_model_patch_that_rebuilds_the_workspace(env: SWEEnv, tmp_path: Path) -> None:
    env.reset(seed=0, options={"task_id": _sample("test", 1)[0]})
    task = env.current
    env.step(fix_command(task))
    # a new file, a link, a deleted file, and byte-code caches from a test run (left out, as .gitignore would)
    env.step("printf 'notes\\n' > NOTES.txt && ln -s NOTES.txt notes-link && python3 -m pytest -q -x >/dev/null 2>&1")
    victim = min(p.name for p in source_tree(task.lib).iterdir() if p.is_file() and p.suffix in {".rst", ".md", ".txt"})
    _obs, _reward, terminated, _truncated, info = env.step(f"rm {victim}")
    assert not terminated and "model_patch" not in info  # only the final step carries it
    *_, info = env.step("submit")
    patch = info["model_patch"]
    assert info["success"] and f"diff --git a/{task.file} b/{task.file}" in patch
    assert "__pycache__" not in patch and ".pyc" not in patch and ".pytest_cache" not in patch
    assert f"+{task.original.splitlines()[0]}" in patch and f"-{task.mutated.splitlines()[0]}" in patch
    tree = _start_tree(task, tmp_path)
    _apply(patch, tree)
    assert (tree / task.file).read_bytes() == (source_tree(task.lib) / task.file).read_bytes()
    assert (tree / "NOTES.txt").read_text() == "notes\n" and os.readlink(tree / "notes-link") == "NOTES.txt"
    assert not (tree / victim).exists()


def test_a_truncated_episode_records_its_patch_too(env: SWEEnv, tmp_path: Path) -> None:
    env.reset(seed=0, options={"task_id": _sample("test", 1)[0]})
    task = env.current
    limit, env.max_turns = env.max_turns, 1
    try:
        *_, truncated, info = env.step(f"printf '\\n# edited\\n' >> {task.file}")
    finally:
        env.max_turns = limit
    assert truncated and info["termination_reason"] == "max_turns"
    tree = _start_tree(task, tmp_path)
    _apply(info["model_patch"], tree)
    assert (tree / task.file).read_bytes() == task.mutated_source() + b"\n# edited\n"


def test_editing_the_tests_or_printing_passed_does_not_resolve(env: SWEEnv) -> None:
    task_id = _sample("test", 1)[0]
    env.reset(seed=0, options={"task_id": task_id})
    task = env.current
    test_file = task.fail_to_pass[0].split("::")[0]
    # every test file becomes trivially passing, and a conftest prints fake PASSED lines
    env.step("for f in $(grep -rl 'def test' --include='*.py' .); do printf 'def test_ok():\\n    pass\\n' > $f; done")
    env.step("printf 'print(\"PASSED \" * 100)\\n' > conftest.py")
    shown, *_ = env.step(f"cat {test_file}")
    assert "test_ok" in shown
    *_, info = env.step("submit")
    assert info["reward_components"]["resolved_reward"] == 0.0 and not info["success"]


def test_a_fix_that_breaks_other_tests_counts_them(env: SWEEnv) -> None:
    task_id = _sample("test", 1)[0]
    env.reset(seed=0, options={"task_id": task_id})
    task = env.current
    env.step(fix_command(task))
    # now break the whole module with a syntax error appended: every chosen test fails
    env.step(f"printf '\\ndef broken(:\\n' >> {task.file}")
    *_, info = env.step("submit")
    c = info["reward_components"]
    assert c["resolved_reward"] == 0.0 and c["f2p_fraction_reward"] == 0.0
    assert c["p2p_broken_reward"] == -float(len(task.pass_to_pass))


def test_structured_tools_view_replace_search_and_submit() -> None:
    try:
        env = envgym.make("envgym/SWE-Tools-v0", split="test").unwrapped
    except envgym.errors.MissingDependencyError as err:
        pytest.skip(str(err))
    try:
        task_id = _sample("test", 2)[1]
        obs, info = env.reset(seed=0, options={"task_id": task_id})
        task = env.current
        assert '{"name": "view", "arguments": {' in obs and '{"tool"' not in obs
        assert info["task"]["tools"] == "structured" and info["tools"] is STRUCTURED_TOOLS
        assert info["parallel_tool_calls"] is False
        view, *_, vinfo = env.step(call("view", path=task.file, start=task.line, end=task.line))
        assert vinfo["action_valid"] and f"{task.line:6d}\t{task.mutated.splitlines()[0]}" in view
        assert vinfo["tools"] is info["tools"] and "deprecation" not in vinfo
        for bad, why in [
            ("not json", "Tool error: not valid JSON"),
            (call("rm"), "Tool error: unknown tool 'rm'; tools: replace, run_tests, search, submit, view."),
            (call("view"), "Tool error (view): arguments: missing required argument(s) ['path']."),
            (call("view", path=task.file, start=0), "Tool error (view): arguments.start: expected at least 1, got 0."),
            (call("view", path="../../etc/passwd"), "cannot read"),
            (call("view", path="nope.py"), "no file 'nope.py'"),
            (call("replace", path="x", old="", new="y"), "arguments.old: expected at least 1 character(s), got 0."),
            (
                call("run_tests", tests=["--co"]),
                "Tool error (run_tests): arguments.tests: test ids or files, not options.",
            ),
            (call("search", pattern="x", path="-r"), "Tool error (search): arguments.path: a relative path"),
            (json.dumps([{"name": "submit", "arguments": {}}]), "one tool call per turn"),
        ]:
            obs, *_, binfo = env.step(bad)
            assert not binfo["action_valid"] and why in obs, (bad, obs)
        found, *_ = env.step(f"```json\n{call('search', pattern=task.mutated.strip()[:20], path=task.file)}\n```")
        assert f"{task.file}:{task.line}:" in found or f"{task.line}:" in found
        reward, info, obs = _play(env, Solver("envgym/SWE-Tools-v0", 0), task_id)
        assert reward == 1.0 and info["success"], obs
    finally:
        env.close()


def test_the_old_tool_form_still_works_with_a_deprecation_note() -> None:
    try:
        env = envgym.make("envgym/SWE-Tools-v0", split="test").unwrapped
    except envgym.errors.MissingDependencyError as err:
        pytest.skip(str(err))
    try:
        task_id = _sample("test", 2)[1]
        env.reset(seed=0, options={"task_id": task_id})
        task = env.current
        old, *_, info = env.step(json.dumps({"tool": "view", "path": task.file, "start": task.line, "end": task.line}))
        new, *_, new_info = env.step(call("view", path=task.file, start=task.line, end=task.line))
        assert old == new and info["action_valid"] and "deprecation" not in new_info
        assert '{"name": "view", "arguments": {"path": ..., "start": ..., "end": ...}}' in info["deprecation"]
        *_, info = env.step('{"tool": "view"}')
        assert not info["action_valid"]
        *_, terminated, _, info = env.step('{"tool": "submit"}')
        assert terminated and "deprecation" in info and not info["success"]
    finally:
        env.close()


def test_the_tools_card_and_schemas() -> None:
    for schema in STRUCTURED_TOOLS:
        jsonschema.Draft202012Validator.check_schema(schema["function"]["parameters"])
    card = SWEEnv.env_card({"tools": "structured"})
    assert "**Tools.**" in card and "``replace(path: string, old: string, new: string)``" in card
    assert "**Tools.**" not in SWEEnv.env_card({"tools": "bash"})


def test_bad_kwargs_name_the_choices() -> None:
    with pytest.raises(InvalidKwargsError, match="sandbox"):
        SWEEnv(sandbox="podman")
    with pytest.raises(InvalidKwargsError, match="unknown SWE library 'toolzz'.*toolz"):
        SWEEnv(libraries="toolzz")
    with pytest.raises(InvalidKwargsError, match="tools"):
        SWEEnv(tools="gui")
    with pytest.raises(InvalidKwargsError, match="output_limit"):
        SWEEnv(output_limit=10)
    with pytest.raises(InvalidKwargsError, match="command_timeout"):
        SWEEnv(command_timeout=0)


def test_library_filter_and_task_choice(env: SWEEnv) -> None:
    lib = select_tasks("test")[0].library
    only = SWEEnv(split="test", libraries=[lib])
    try:
        assert {t.library for t in only.tasks} == {lib}
        _, info = only.reset(seed=5)
        assert info["task"]["library"] == lib
        with pytest.raises(InvalidKwargsError, match="is not a 'test' task"):
            only.reset(seed=0, options={"task_id": select_tasks("train")[0].id})
    finally:
        only.close()


def test_the_docker_sandbox_plays_the_same_tasks() -> None:
    """One container per episode: the oracle resolves, the do-nothing agent does not, and the
    container is gone after close."""
    from envgym.sandbox import sandbox_class

    reason = sandbox_class("docker").unavailable_reason()
    if reason is not None:
        pytest.skip(f"no Docker sandbox here: {reason}")
    import docker

    from envgym.sandbox.dockerbox import LABEL, OWNER_LABEL

    client = docker.from_env()

    def ours() -> set[str]:
        """This process's sandbox containers (parallel test workers run sandboxes of their own)."""
        found = client.containers.list(all=True, filters={"label": LABEL})
        return {c.id for c in found if c.labels.get(OWNER_LABEL, "").split(":")[-2:-1] == [str(os.getpid())]}

    before = ours()
    env = envgym.make("envgym/SWE-v0", split="test", sandbox="docker").unwrapped
    try:
        for task_id in _sample("test", 2):
            reward, info, obs = _play(env, Solver("envgym/SWE-v0", 0), task_id)
            assert reward == 1.0 and info["success"], (task_id, obs)
            reward, info, _ = _play(env, _Submit(), task_id)
            assert reward == 0.0 and info["reward_components"]["f2p_fraction_reward"] < 1.0
    finally:
        env.close()
    assert ours() <= before
