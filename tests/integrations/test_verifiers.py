"""The verifiers adapter (envgym.integrations.verifiers), evaluated by verifiers' own ``vf-eval``.

One module-scoped run: the fake OpenAI server (tests/support/openai_server.py) answers with the
oracle's actions for FrozenLake seeds 0 and 1 and with an invalid action for seed 2; ``vf-eval``
(the real command, the plugin on PYTHONPATH) evaluates the three rows, and envgym's own harness
plays the same seeds against the same server (agent ``openai:fake-model@URL``). The rewards,
components, actions and the messages the model was sent must be the same on both sides.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lazy import installed
from openai_server import FakeOpenAIServer

import envgym
from envgym.errors import ConfigError, UnknownEnvError
from envgym.rollout import Conversation, PromptConfig, RunConfig, run, tasks_for

#: envgym.integrations.verifiers, imported when the module's first test runs (:func:`_adapter`)
adapter: Any = None

pytestmark = [
    pytest.mark.skipif(not installed("verifiers"), reason="verifiers is not installed (envgym[integrations])"),
    # asyncio.run in the main thread: no Playwright of an earlier test may hold it (conftest).
    pytest.mark.usefixtures("no_thread_playwright"),
]


@pytest.fixture(scope="module", autouse=True)
def _adapter() -> None:
    """Import the adapter, and so verifiers, once this module's tests run, not when it is collected:
    verifiers takes 8 s of CPU to import, which a worker collecting the file without running it
    would pay (tests/support/lazy.py)."""
    global adapter
    from envgym.integrations import verifiers

    adapter = verifiers


ROOT = Path(__file__).resolve().parents[2]
ENV_ID = "envgym/FrozenLake-v0"
ORACLE_SEEDS = (0, 1)
WRONG_SEED = 2
MAX_TURNS = 4
WRONG_ACTION = "jump"


def first_user_message(env_id: str, seed: int) -> str:
    env = envgym.make(env_id)
    try:
        observation, info = env.reset(seed=seed)
        return Conversation(PromptConfig(), env_id, observation, info).messages()[-1]["content"]
    finally:
        env.close()


class ScriptedModel:
    """Replies the planned action of the episode a request belongs to (found by its first user
    message), turn by turn; an unknown episode or a turn past the plan gets ``WRONG_ACTION``."""

    def __init__(self, plans: dict[str, list[str]]) -> None:
        self.plans = plans

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        first = next(m["content"] for m in messages if m["role"] == "user")
        turn = sum(m["role"] == "assistant" for m in messages)
        plan = self.plans.get(first, [])
        return plan[turn] if turn < len(plan) else WRONG_ACTION


def vf_eval(server: FakeOpenAIServer, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``vf-eval`` command of this venv with the plugin importable, against ``server``."""
    env = {**os.environ, "FAKE_API_KEY": "not-a-secret"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (adapter.plugin_dir(), env.get("PYTHONPATH")) if p)
    command = [
        str(Path(sys.executable).parent / "vf-eval"),
        adapter.TASKSET_ID,
        *args,
        "-m",
        "fake-model",
        "--client.base-url",
        server.url,
        "--client.api-key-var",
        "FAKE_API_KEY",
        "--no-push",
        "--no-rich",
        "-o",
        str(out),
        "--run.name",
        "run",
    ]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, env=env, cwd=out)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    oracle = run(RunConfig(agent="oracle", tasks=tasks_for(ENV_ID, ORACLE_SEEDS)))
    oracle_actions = {t.seed: [turn.action for turn in t.turns] for t in oracle.trajectories}
    plans = {first_user_message(ENV_ID, seed): actions for seed, actions in oracle_actions.items()}
    seeds = [*ORACLE_SEEDS, WRONG_SEED]
    with FakeOpenAIServer(action=ScriptedModel(plans)) as server:
        out = tmp_path_factory.mktemp("vf")
        proc = vf_eval(
            server,
            out,
            "--env.taskset.env-id",
            ENV_ID,
            "--env.taskset.seeds",
            json.dumps(seeds),
            "--env.taskset.max-turns",
            str(MAX_TURNS),
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        vf_requests = list(server.requests)
        server.reset_stats()
        harness = run(
            RunConfig(agent=f"openai:fake-model@{server.url}", tasks=tasks_for(ENV_ID, seeds), max_turns=MAX_TURNS)
        )
        harness_requests = list(server.requests)
    episodes = [json.loads(line) for line in (out / "run" / "traces.jsonl").read_text().splitlines()]
    traces = {e["task"]["data"]["seed"]: e["traces"][0] for e in episodes}
    assert all(e["ok"] for e in episodes), [e["errors"] for e in episodes]
    return {
        "oracle_actions": oracle_actions,
        "traces": traces,
        "harness": {t.seed: t for t in harness.trajectories},
        "vf_requests": vf_requests,
        "harness_requests": harness_requests,
    }


@pytest.mark.slow
def test_oracle_replies_score_the_oracle_return(played: dict[str, Any]) -> None:
    for seed in ORACLE_SEEDS:
        trace = played["traces"][seed]
        assert trace["rewards"] == {adapter.RETURN_REWARD: {"score": 1.0, "weight": 1.0}}
        assert trace["metrics"]["success"] == 1.0
        assert trace["metrics"]["success_reward"] == 1.0
        assert trace["info"]["envgym"]["termination_reason"] == "success"
        assert trace["info"]["envgym"]["actions"] == played["oracle_actions"][seed]


@pytest.mark.slow
def test_wrong_replies_fail_and_are_cut_at_max_turns(played: dict[str, Any]) -> None:
    trace = played["traces"][WRONG_SEED]
    assert trace["rewards"][adapter.RETURN_REWARD]["score"] < 1.0
    assert trace["metrics"]["success"] == 0.0
    assert trace["metrics"]["turns"] == MAX_TURNS
    assert trace["metrics"]["invalid_actions"] == MAX_TURNS  # "jump" is no FrozenLake move
    assert trace["info"]["envgym"] == {
        "termination_reason": "max_turns",
        "truncated_by": "harness_max_turns",
        "actions": [WRONG_ACTION] * MAX_TURNS,
    }


@pytest.mark.slow
def test_scores_equal_envgyms_own_harness(played: dict[str, Any]) -> None:
    for seed, traj in played["harness"].items():
        trace = played["traces"][seed]
        assert trace["rewards"][adapter.RETURN_REWARD]["score"] == pytest.approx(traj.total_reward, abs=1e-12)
        for name, value in traj.reward_components.items():
            assert trace["metrics"][name] == pytest.approx(value, abs=1e-12), name
        assert trace["info"]["envgym"]["actions"] == [turn.action for turn in traj.turns]
        assert trace["info"]["envgym"]["termination_reason"] == traj.termination_reason
        assert trace["metrics"]["invalid_actions"] == traj.invalid_actions
        assert trace["metrics"]["success"] == float(traj.success)


@pytest.mark.slow
def test_the_model_is_sent_envgyms_own_messages(played: dict[str, Any]) -> None:
    """Every request vf-eval made carries the same messages as one envgym's harness made."""

    def conversations(requests: list[dict[str, Any]]) -> list[str]:
        return sorted(json.dumps(r["messages"], sort_keys=True) for r in requests)

    assert len(played["vf_requests"]) == sum(len(t.turns) for t in played["harness"].values())
    assert conversations(played["vf_requests"]) == conversations(played["harness_requests"])
    first = played["vf_requests"][0]["messages"]
    assert first[0]["role"] == "system" and "FrozenLake" in first[0]["content"]


# -- in-process: the rows and the errors -----------------------------------------------------------


def test_load_environment_rows_are_envgym_seeds_with_envgyms_prompt() -> None:
    env = adapter.load_environment(ENV_ID, seeds=[3, 5], max_turns=7)
    assert isinstance(env, adapter.EnvgymEnv)
    rows = list(env.taskset)
    assert [row.data.seed for row in rows] == [3, 5]
    assert [row.key for row in rows] == [f"{ENV_ID}#3", f"{ENV_ID}#5"]
    assert rows[0].data.prompt == first_user_message(ENV_ID, 3)
    assert rows[0].data.max_turns == 7 and rows[0].data.system_prompt.startswith(
        "You are an agent acting in FrozenLake"
    )
    assert [row.data.seed for row in adapter.load_environment(ENV_ID, num_examples=3, first_seed=10).taskset] == [
        10,
        11,
        12,
    ]


def test_load_environment_passes_kwargs_and_split_to_the_env() -> None:
    env = adapter.load_environment("envgym/FrozenLake-v0", num_examples=1, split="test", size=4)
    (row,) = env.taskset
    assert row.data.env_kwargs == {"size": 4, "split": "test"}


def test_multi_agent_ids_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match="multi-agent.*TicTacToe-v0"):
        adapter.load_environment("envgym/Coop-PublicGoods-Text-v0")


def test_unknown_ids_get_did_you_mean() -> None:
    with pytest.raises(UnknownEnvError, match="FrozenLake-v0"):
        adapter.load_environment("envgym/FrozenLak-v0")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"prompt": {"history": "last_k"}}, "history"),
        ({"seeds": [1, 1]}, "distinct"),
        ({"num_examples": 0}, "num_examples"),
        ({"prompt": {"histroy": "full"}}, "Did you mean 'history'"),
    ],
)
def test_bad_settings_fail_before_any_episode(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        adapter.load_environment(ENV_ID, **settings)


def test_the_plugin_module_exports_this_modules_classes() -> None:
    """``envgym_verifiers`` (what verifiers imports for the id ``envgym-verifiers``) is the file in
    plugin_dir() in a fresh process, and this module itself once it is imported."""
    import importlib.util

    path = Path(adapter.plugin_dir()) / "envgym_verifiers.py"
    spec = importlib.util.spec_from_file_location("envgym_verifiers_file", path)
    assert spec is not None and spec.loader is not None
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    assert shim.__all__ == adapter.__all__
    assert shim.EnvgymTaskset is adapter.EnvgymTaskset and shim.EnvgymEnv is adapter.EnvgymEnv
    assert sys.modules["envgym_verifiers"] is adapter


@pytest.mark.slow
def test_example_smoke_run() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "verifiers_eval.py"), "--smoke"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("envgym/")]
    # env_id, seed, return, success, turns, termination: the oracle's moves for seeds 0 and 1, an
    # invalid move for seed 2 (cut at the example's 4 turns).
    assert [(r[1], r[2], r[3], r[5]) for r in rows] == [
        ("0", "1.000", "1", "success"),
        ("1", "1.000", "1", "success"),
        ("2", rows[2][2], "0", "max_turns"),
    ], proc.stdout
    assert float(rows[2][2]) < 0 and rows[2][4] == "4"


# -- in-process episodes: verifiers' own Env.run_episode, no eval command ---------------------------


def play(env: adapter.EnvgymEnv, server: FakeOpenAIServer) -> list[Any]:
    """Every row of ``env`` played by verifiers (``Env.run_episode``) against ``server``."""
    import verifiers.v1 as vf

    async def episodes() -> list[Any]:
        client = vf.EvalClientConfig(base_url=server.url, api_key_var="FAKE_API_KEY")
        ctx = vf.ModelContext(client=client, model="fake-model", sampling=vf.SamplingConfig())
        async with env.serving():
            return [await env.run_episode(task, ctx) for task in env.taskset]

    return asyncio.run(episodes())


@pytest.fixture(scope="module")
def oracle_model() -> ScriptedModel:
    oracle = run(RunConfig(agent="oracle", tasks=tasks_for(ENV_ID, ORACLE_SEEDS)))
    return ScriptedModel(
        {first_user_message(ENV_ID, t.seed): [turn.action for turn in t.turns] for t in oracle.trajectories}
    )


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    from envgym.serve import Server

    with Server([ENV_ID]) as server:
        yield "ws" + server.url[len("http") :]


def summary(episode: Any) -> tuple[Any, ...]:
    (trace,) = episode.traces
    return episode.ok, trace.reward, dict(trace.metrics), trace.info["envgym"]


def test_an_env_behind_envgym_serve_plays_the_same_episodes(oracle_model: ScriptedModel, served: str) -> None:
    seeds = [*ORACLE_SEEDS, WRONG_SEED]
    with FakeOpenAIServer(action=oracle_model) as server:
        local = play(adapter.load_environment(ENV_ID, seeds=seeds, max_turns=MAX_TURNS), server)
        remote = play(adapter.load_environment(ENV_ID, seeds=seeds, max_turns=MAX_TURNS, url=served), server)
    assert [summary(e) for e in remote] == [summary(e) for e in local]
    assert [e.traces[0].reward for e in remote[:2]] == [1.0, 1.0]
    assert remote[2].traces[0].info["envgym"]["termination_reason"] == "max_turns"


def test_a_served_id_the_server_does_not_serve_is_refused(served: str) -> None:
    with pytest.raises(KeyError, match="does not serve 'envgym/Wordle-v0'"):
        adapter.load_environment("envgym/Wordle-v0", url=served)


def test_a_failing_model_server_is_an_error_not_a_score() -> None:
    with FakeOpenAIServer(action="down") as server:
        server.fail_next(10, status=500)
        (episode,) = play(adapter.load_environment(ENV_ID, seeds=[0]), server)
    (trace,) = episode.traces
    assert not episode.ok and not trace.ok
    assert trace.rewards == {}  # no return recorded: nothing to train or rank on
    assert trace.info["envgym"]["termination_reason"] == "error"
    assert "500" in trace.errors[-1].message


def test_prime_rls_env_server_plays_rows_sent_over_the_wire(oracle_model: ScriptedModel) -> None:
    """prime-rl runs envs in verifiers' env servers (ZMQ): the orchestrator reads the rows and
    sends each one's task data; the server rebuilds the task and plays it."""
    import verifiers.v1 as vf
    from verifiers.v1.serve.client import EnvClient
    from verifiers.v1.serve.server import EnvServer

    env = adapter.load_environment(ENV_ID, seeds=[*ORACLE_SEEDS, WRONG_SEED], max_turns=MAX_TURNS)
    rows = [row.data.model_dump(mode="json") for row in env.taskset]

    async def over_the_wire(url: str) -> list[Any]:
        server = EnvServer(env.config, address="tcp://127.0.0.1:0")
        serving = asyncio.create_task(server.run())
        client = EnvClient(server.address)
        try:
            config = vf.EvalClientConfig(base_url=url, api_key_var="FAKE_API_KEY")
            return [await client.run(config, "fake-model", vf.SamplingConfig(), row) for row in rows]
        finally:
            await client.close()
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    with FakeOpenAIServer(action=oracle_model) as server:
        wired = asyncio.run(over_the_wire(server.url))
        local = play(env, server)
    assert [(t.rewards, t.metrics, t.info["envgym"]) for e in wired for t in e.traces] == [
        (t.rewards, t.metrics, t.info["envgym"]) for e in local for t in e.traces
    ]
    assert [e.traces[0].reward for e in wired] == [1.0, 1.0, local[2].traces[0].reward]


def test_the_seats_own_turn_limit_cuts_the_episode_as_a_harness_cut() -> None:
    with FakeOpenAIServer(action=WRONG_ACTION) as server:
        env = adapter.load_environment(ENV_ID, seeds=[0], agent={"max_turns": 2})
        (episode,) = play(env, server)
    (trace,) = episode.traces
    assert episode.ok and server.request_count == 2
    assert trace.metrics["turns"] == 2 and trace.metrics["invalid_actions"] == 2
    assert trace.info["envgym"] == {
        "termination_reason": "max_turns",
        "truncated_by": "verifiers_limit",
        "actions": [WRONG_ACTION, WRONG_ACTION],
    }
    assert trace.reward == pytest.approx(trace.metrics["invalid_action_reward"])


def test_vf_eval_config_errors_name_the_bad_id() -> None:
    """What vf-eval validates (its --env block) refuses a bad id with envgym's "did you mean"."""
    import pydantic
    import verifiers.v1 as vf

    with pytest.raises(pydantic.ValidationError, match="Did you mean 'envgym/FrozenLake-v0'"):
        vf.resolve_env_config({"taskset": {"id": adapter.TASKSET_ID, "env_id": "envgym/FrozenLak-v0"}})
    with pytest.raises(pydantic.ValidationError, match="multi-agent"):
        vf.resolve_env_config({"taskset": {"id": adapter.TASKSET_ID, "env_id": "envgym/Coop-PublicGoods-Text-v0"}})
    config = vf.resolve_env_config({"taskset": {"id": adapter.TASKSET_ID, "env_id": ENV_ID}})
    assert isinstance(config, adapter.EnvgymEnvConfig) and config.agent.runtime.type == "subprocess"


@pytest.mark.parametrize("env_id", ["envgym/TicTacToe-v0", "envgym/Household-Easy-v0", "envgym/Service-Retail-v0"])
def test_other_families_score_as_envgyms_harness(env_id: str) -> None:
    """A game against the built-in opponent, a text world, a simulated customer: the oracle's
    moves through verifiers score what envgym's harness scores for the same replies."""
    oracle = run(RunConfig(agent="oracle", tasks=tasks_for(env_id, [0])))
    (planned,) = oracle.trajectories
    model = ScriptedModel({first_user_message(env_id, 0): [turn.action for turn in planned.turns]})
    with FakeOpenAIServer(action=model) as server:
        (episode,) = play(adapter.load_environment(env_id, seeds=[0], max_turns=30), server)
        (harness,) = run(
            RunConfig(agent=f"openai:fake-model@{server.url}", tasks=tasks_for(env_id, [0]), max_turns=30)
        ).trajectories
    (trace,) = episode.traces
    assert episode.ok and harness.success and trace.metrics["success"] == 1.0
    assert trace.reward == pytest.approx(harness.total_reward, abs=1e-12) == planned.total_reward
    assert {k: trace.metrics[k] for k in harness.reward_components} == pytest.approx(harness.reward_components)
    assert trace.info["envgym"]["actions"] == [turn.action for turn in harness.turns]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("think <action>up</action> and <action>down</action>", "think <action>up</action>"),
        ("<action>up", "<action>up"),  # no stop string reached: unchanged
        ("no tags </action> <action>x</action>", "no tags "),  # the stop string closed no open tag
        ("<ACTION>left</action>", "<ACTION>left</action>"),
        ("plain text", "plain text"),
    ],
)
def test_cut_at_stop_reads_a_reply_as_a_stopping_server_returns_it(reply: str, expected: str) -> None:
    assert adapter.cut_at_stop(reply, ("</action>",)) == expected
    assert adapter.cut_at_stop(reply, ()) == reply


def test_the_first_action_block_is_the_action_as_under_envgyms_harness() -> None:
    """envgym's harness asks the server to stop at ``</action>``, so of a reply with two action
    blocks it plays the first; verifiers' transcript keeps the whole reply, the env plays the same."""
    with FakeOpenAIServer(action="down</action> on second thought <action>up") as server:
        (episode,) = play(adapter.load_environment(ENV_ID, seeds=[0], max_turns=2), server)
        run(RunConfig(agent=f"openai:fake-model@{server.url}", tasks=tasks_for(ENV_ID, [0]), max_turns=1))
        harness_request = server.requests[-1]
    (trace,) = episode.traces
    assert harness_request["stop"] == ["</action>"]
    assert trace.info["envgym"]["actions"] == ["down", "down"]
    assert trace.metrics["format_errors"] == 0
    assert "on second thought" in trace.branches[-1].messages[-1].content  # the transcript is the model's
