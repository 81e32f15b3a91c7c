"""envgym envs in TRL's ``GRPOTrainer`` through its ``environment_factory`` (envgym.integrations.trl).

The fast tests drive the environment objects the way TRL's tool loop does (``reset(**row)``,
the ``act`` tool, ``get_reward()``, reward functions called with ``environments=``) and check
every reward against the same episode played in-process with ``envgym.make``. The slow ones
train for real with TRL on the tiny test model: ``examples/trl_grpo.py --smoke`` (its ``main``;
envs in-process) and the example's trainer over a live ``envgym serve`` (one server per module).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envgym.agents.oracle import load_solver

import envgym
from envgym.errors import ConfigError, InvalidKwargsError, UnknownEnvError
from envgym.integrations import trl as envgym_trl
from envgym.rewards.metrics import episode_totals, metric_key

ROOT = Path(__file__).resolve().parents[2]
LAKE = "envgym/FrozenLake-v0"
#: FrozenLake seed 3 (4x4, easy): P at row 4 col 2, a hole right above it.
ROW = {"prompt": [{"role": "user", "content": "play"}], "env_id": LAKE, "seed": 3, "split": "train"}


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("trl_grpo_example", ROOT / "examples" / "trl_grpo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def played_in_process(env_id: str, seed: int, actions: list[str], **kwargs: Any) -> list[tuple[str, float, dict]]:
    """``(observation, reward, reward_components)`` of each step of ``actions`` with envgym.make."""
    env = envgym.make(env_id, **kwargs)
    env.reset(seed=seed)
    out = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, float(reward), dict(info["reward_components"])))
        if terminated or truncated:
            break
    env.close()
    return out


@pytest.fixture(scope="module", autouse=True)
def no_mlflow() -> Iterator[None]:
    """TRL imports MLflow (seconds of CPU) where it is installed, for its profiling metrics; these
    tests report to no tracker. Off while they run, if they are the first to import TRL."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISABLE_MLFLOW_INTEGRATION", "TRUE")
        yield


@pytest.fixture(scope="module")
def lake() -> Iterator[envgym_trl.EnvironmentFactory]:
    factory = envgym_trl.environment_factory(LAKE, max_turns=3)
    yield factory
    factory.close()


def test_an_episode_through_the_tool_earns_what_envgym_gives(lake) -> None:
    env = lake()
    first = env.reset(**ROW)
    direct = envgym.make(LAKE, max_turns=3)
    obs, _ = direct.reset(seed=3)
    direct.close()
    # TRL appends reset's text to the prompt: the observation, then the valid actions.
    assert first == f"\n\n{obs}\n\nValid actions: up, down, left, right"

    steps_before = lake.steps
    answers = [env.act(a) for a in ("left", "jump", "up")]
    expected = played_in_process(LAKE, 3, ["left", "jump", "up"], max_turns=3)
    assert answers[0] == expected[0][0] + "\n\nValid actions: up, down, left, right"
    assert answers[1].startswith("Invalid action 'jump'")
    assert answers[2] == expected[2][0] + "\n\nThe episode is over (failure)."
    assert lake.steps - steps_before == 3

    record = env.episode
    assert record.actions == ("left", "jump", "up")
    assert list(record.rewards) == [r for _, r, _ in expected]
    assert record.total_reward == pytest.approx(-0.1)
    assert record.reward_components == {"success_reward": 0.0, "invalid_action_reward": -0.1, "step_cost_reward": 0.0}
    assert record.termination_reason == "failure" and record.finished and record.scored
    assert record.task_id.startswith("frozen_lake-4x4-") and record.seed == 3 and record.split == "train"

    recorded = len(lake.episodes)
    assert env.get_reward() == pytest.approx(-0.1)
    assert env.get_reward() == pytest.approx(-0.1)  # TRL scores once; a second call records nothing new
    assert len(lake.episodes) == recorded + 1 and lake.episodes[-1] == record


def test_a_step_after_the_end_is_refused_with_a_message(lake) -> None:
    env = lake()
    env.reset(**ROW)
    env.act("up")  # into the hole
    steps = lake.steps
    answer = env.act("left")
    assert answer == "The episode is already over (failure); this action was not taken. Stop calling act."
    assert lake.steps == steps and env.episode.actions == ("up",)


def test_the_oracle_through_act_succeeds_with_envgyms_reward() -> None:
    factory = envgym_trl.environment_factory("envgym/Sokoban-v0")
    try:
        env = factory()
        env.reset(seed=5)
        reference = envgym.make("envgym/Sokoban-v0")
        obs, info = reference.reset(seed=5)
        policy = load_solver("envgym/Sokoban-v0")("envgym/Sokoban-v0", 5)
        rewards, done = [], False
        while not done:
            action = policy.act(obs, info)
            answer = env.act(action)
            obs, reward, terminated, truncated, info = reference.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
            assert answer.startswith(obs)
        reference.close()
        assert env.episode.termination_reason == "success" and env.episode.success
        assert env.get_reward() == pytest.approx(math.fsum(rewards), abs=1e-12)
        assert env.get_reward() > 0
    finally:
        factory.close()


def test_rows_pick_seed_and_split_and_other_columns_are_ignored(lake) -> None:
    env = lake()
    env.reset(prompt="anything", seed=9, split="test", env_id=LAKE, difficulty_note="ignored")
    reference = envgym.make(LAKE, split="test")
    _, info = reference.reset(seed=9)
    reference.close()
    assert env.episode.task_id == info["task"]["id"] and env.episode.split == "test"
    env.reset(seed=9)  # a row without a split plays the factory's default (train)
    assert env.episode.split == "train" and env.episode.task_id != info["task"]["id"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"seed": -1}, "'seed' must be an integer >= 0"),
        ({"seed": "3"}, "'seed' must be an integer >= 0"),
        ({"seed": 1, "split": 3}, "'split' must be a string"),
        ({"seed": 1, "env_id": "envgym/Sokoban-v0"}, "plays 'envgym/FrozenLake-v0'"),
    ],
)
def test_bad_rows_fail_clearly(lake, row: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        lake().reset(**row)


def test_bad_factories_fail_before_training() -> None:
    with pytest.raises(UnknownEnvError, match="FrozenLake-v0"):
        envgym_trl.environment_factory("envgym/FrozenLak-v0")
    with pytest.raises(ConfigError, match="multi-agent"):
        envgym_trl.environment_factory("envgym/Coop-ApacheProject-Text-v0")
    with pytest.raises(InvalidKwargsError, match="max_turn"):
        envgym_trl.environment_factory(LAKE, max_turn=3)
    with pytest.raises(ConfigError, match="history"):
        envgym_trl.environment_factory(LAKE, history=0)


def test_an_env_failure_is_not_scored(lake) -> None:
    """A crashed env (here: a step that raises, standing in for a dead browser or server) ends the
    episode as unscored: TRL gets None, which it leaves out of the group baseline."""
    env = lake()
    env.reset(**ROW)
    env.act("left")

    def crash(action: Any) -> Any:
        raise RuntimeError("the browser went away")

    env._env.step = crash
    answer = env.act("up")
    assert "The environment failed (RuntimeError: the browser went away)" in answer
    assert env.act("up") == answer  # the episode stays over
    assert env.get_reward() is None
    assert env.episode.error == "RuntimeError: the browser went away" and not env.episode.scored
    assert [f(environments=[env]) for f in envgym_trl.reward_functions(lake)] == [[None], [None], [None]]
    env.reset(**ROW)  # the next rollout gets a fresh env
    assert env.act("left").startswith("You moved left.")


def test_a_server_lost_mid_episode_is_not_scored() -> None:
    """The real failure over the wire: the server stops mid-episode. The next action reports it,
    the episode is unscored (None to TRL), and a reset with no server raises the client's typed,
    retryable error instead of starting an episode."""
    from envgym.remote import ServerLostError
    from envgym.serve import Server

    server = Server([LAKE]).start()
    try:
        factory = envgym_trl.environment_factory(LAKE, url=server.url, max_turns=3)
        env = factory()
        env.reset(**ROW)
        assert env.act("left").startswith("You moved left.")
    finally:
        server.stop()
    answer = env.act("up")
    assert answer.startswith("The environment failed (") and "will not be scored" in answer
    assert env.get_reward() is None and not factory.episodes[-1].scored
    assert env.episode.actions == ("left",)
    with pytest.raises(ServerLostError) as caught:
        env.reset(**ROW)
    assert caught.value.retryable
    factory.close()


def test_reward_functions_are_the_components_of_each_rollout(lake) -> None:
    functions = envgym_trl.reward_functions(lake)
    assert [f.__name__ for f in functions] == ["success", "invalid_action", "step_cost"]
    # TRL logs each as rewards/<name>/mean: the key envgym's own metrics use.
    assert [f"rewards/{f.__name__}/mean" for f in functions] == [metric_key(c) for c in lake.reward_components]
    a, b = lake(), lake()
    a.reset(**ROW)
    b.reset(**ROW)
    a.act("jump")
    a.act("jump")
    b.act("left")
    sokoban = envgym_trl.environment_factory("envgym/Sokoban-v0")
    other = sokoban()  # another env's rollout: not scored by these functions
    totals = {f.__name__: f(prompts=[], completions=[], environments=[a, b, other]) for f in functions}
    sokoban.close()
    assert totals == {
        "success": [0.0, 0.0, None],
        "invalid_action": [pytest.approx(-0.2), 0.0, None],
        "step_cost": [0.0, 0.0, None],
    }
    # The first function logs the episode metrics of our rollouts through TRL's log_metric.
    logged: list[tuple[str, float]] = []
    b.act("up")  # b: left, up: into the hole, over; a: jump, jump: not over
    functions[0](environments=[a, b, other], log_metric=lambda key, value: logged.append((key, value)))
    assert dict(logged) == {
        "episode/unscored": 0.0,
        "episode/success_rate": 0.0,
        "episode/turns": 2.0,
        "episode/finished": 0.5,
    }
    assert len(logged) == 4
    logged.clear()
    functions[1](environments=[a, b], log_metric=lambda key, value: logged.append((key, value)))
    assert logged == []  # once per batch, not once per component
    with pytest.raises(ConfigError, match="environment_factory"):
        functions[0](prompts=[], completions=[])
    with pytest.raises(ConfigError, match="EnvironmentFactory"):
        envgym_trl.reward_functions(LAKE)


def test_dataset_rows_and_their_checks() -> None:
    rows = envgym_trl.dataset(LAKE, seeds=range(3), split="test")
    assert rows.column_names == ["prompt", "env_id", "seed", "split"]
    assert rows["seed"] == [0, 1, 2] and set(rows["split"]) == {"test"}
    assert rows[0]["prompt"] == [{"role": "user", "content": envgym_trl.DEFAULT_INSTRUCTION.format(env_id=LAKE)}]
    with pytest.raises(InvalidKwargsError, match="Did you mean 'test'"):
        envgym_trl.dataset(LAKE, seeds=[0], split="tset")
    with pytest.raises(ConfigError, match="at least one"):
        envgym_trl.dataset(LAKE, seeds=[])
    with pytest.raises(ConfigError, match=">= 0"):
        envgym_trl.dataset(LAKE, seeds=[1, -2])


SQL = "envgym/Tools-SQL-Easy-v0"


def test_a_tool_env_gives_trl_its_own_tools_with_the_envs_schemas() -> None:
    from transformers.utils import get_json_schema

    factory = envgym_trl.environment_factory(SQL, size="small")
    try:
        env = factory()
        env.reset(seed=2)
        methods = {
            name: getattr(env, name)
            for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")
        }
        # what TRL collects as the tools: the env's four, and no `act`
        assert sorted(methods) == ["describe_table", "execute_sql", "list_tables", "submit"]
        reference = envgym.make(SQL, size="small")
        assert factory.tools == reference.reset(seed=0)[1]["tools"]
        reference.close()
        for tool in factory.tools:
            function = tool["function"]
            built = get_json_schema(methods[function["name"]])["function"]  # TRL's schema of the method
            assert built["name"] == function["name"]
            assert built["description"] == " ".join(function["description"].split())
            wanted = function["parameters"]
            assert built["parameters"].get("required", []) == wanted.get("required", [])
            assert {k: v["type"] for k, v in built["parameters"]["properties"].items()} == {
                k: v["type"] for k, v in wanted["properties"].items()
            }
    finally:
        factory.close()


def test_tool_calls_are_env_steps_and_earn_what_envgym_gives() -> None:
    from envgym.agents.solvers.tools_sql import Solver

    factory = envgym_trl.environment_factory(SQL, size="small")
    try:
        env = factory()
        first = env.reset(seed=4, split="test")
        reference = envgym.make(SQL, size="small", split="test")
        obs, info = reference.reset(seed=4)
        assert first == "\n\n" + obs
        # a call with arguments against the schema is the env's invalid step, as in-process
        bad = env.execute_sql(query="")
        expected = reference.step(json.dumps({"name": "execute_sql", "arguments": {"query": ""}}))
        assert bad == expected[0] and not expected[4]["action_valid"]
        solver = Solver(SQL, 4)
        rewards = [float(expected[1])]
        done = False
        while not done:
            call = json.loads(solver.act(obs, info))
            answer = getattr(env, call["name"])(**call["arguments"])  # how TRL runs a parsed tool call
            obs, reward, terminated, truncated, info = reference.step(json.dumps(call))
            rewards.append(float(reward))
            done = terminated or truncated
            assert answer.startswith(obs)
        reference.close()
        episode = env.episode
        assert episode.success and episode.termination_reason == "success"
        assert json.loads(episode.actions[0]) == {"name": "execute_sql", "arguments": {"query": ""}}
        assert env.get_reward() == pytest.approx(math.fsum(rewards), abs=1e-12)
        assert env.submit(query="SELECT 1").startswith("The episode is already over (success)")
        assert "Stop calling submit." in env.submit(query="SELECT 1")
    finally:
        factory.close()


def test_tools_act_keeps_the_one_act_tool_for_a_tool_env() -> None:
    factory = envgym_trl.environment_factory(SQL, size="small", tools="act")
    try:
        env = factory()
        assert factory.tools == [] and callable(env.act) and not hasattr(env, "execute_sql")
        env.reset(seed=1)
        assert env.act('{"name": "list_tables", "arguments": {}}').startswith("Tool result (list_tables): customers")
        assert env.episode.actions == ('{"name": "list_tables", "arguments": {}}',)
    finally:
        factory.close()
    with pytest.raises(InvalidKwargsError, match="tools must be one of 'auto', 'act'"):
        envgym_trl.environment_factory(SQL, size="small", tools="native")


def test_grpo_trainer_shows_the_envs_tools_to_the_model(tmp_path: Path) -> None:
    """TRL's own set-up probes the factory: its per-env tools are the env's, and its chat
    template renders their schemas into the prompt."""
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = envgym.models.tiny_causal_lm(seed=0)
    tokenizer = envgym_trl.use_tool_chat_template(tokenizer)
    factory = envgym_trl.environment_factory(SQL, size="small")
    try:
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            train_dataset=envgym_trl.dataset(SQL, seeds=range(4)),
            args=GRPOConfig(
                output_dir=str(tmp_path),
                per_device_train_batch_size=2,
                num_generations=2,
                max_steps=1,
                report_to="none",
                use_cpu=True,
                activation_checkpointing=False,  # said, so the deprecated name stays unset
            ),
            environment_factory=factory,
        )
        names = sorted(tool.__name__ for tool in trainer._env_tools[None])
        assert names == ["describe_table", "execute_sql", "list_tables", "submit"]
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}], tools=trainer._env_tools[None], tokenize=False
        )
        for tool in factory.tools:
            assert f'"name": "{tool["function"]["name"]}"' in prompt
        assert '"query"' in prompt
    finally:
        factory.close()


def test_the_tool_template_lets_trl_render_and_parse_tool_calls() -> None:
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    tokenizer = envgym.models.load_tokenizer("smollm2")
    assert not supports_tool_calling(tokenizer)  # SmolLM2's own template has no tools
    envgym_trl.use_tool_chat_template(tokenizer)
    assert supports_tool_calling(tokenizer)
    add_response_schema(tokenizer)  # TRL recognises the template, so it can parse the calls
    parsed = tokenizer.parse_response(
        '<tool_call>\n{"name": "act", "arguments": {"action": "up"}}\n</tool_call>', prefix=""
    )
    assert parsed["tool_calls"][0]["function"] == {"name": "act", "arguments": {"action": "up"}}


def test_importing_the_adapter_imports_neither_trl_nor_torch() -> None:
    code = "import sys, envgym.integrations.trl; print(sorted({'trl', 'torch', 'datasets'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"


def test_the_documented_recipe_is_a_valid_grpo_config(tmp_path: Path) -> None:
    """The example's full recipe (not run here: SmolLM2 on a GPU) is one TRL accepts: a whole
    number of groups per step, components logged at weight 0."""
    example = load_example()
    recipe = example.Recipe()
    config = example.grpo_config(recipe, 3, str(tmp_path))
    assert (config.max_steps, config.num_generations, config.per_device_train_batch_size) == (200, 4, 8)
    assert config.generation_batch_size % config.num_generations == 0
    assert config.reward_weights == [0.0, 0.0, 0.0] and config.max_tool_calling_iterations == 8
    assert recipe.model == "smollm2" and recipe.warmup_steps > 0 and recipe.warmup_actions == ()


# -- real training with TRL on the tiny test model -------------------------------------------------


def check_trained_on_envgym(summary: dict[str, Any], *, url: str | None) -> None:
    """What a smoke run must show: 2 TRL steps whose logged rewards are the returns of episodes
    envgym played (each replayed in-process to the same rewards), and weights that moved."""
    assert summary["steps"] == 2 and summary["url"] == url
    assert summary["env_steps"] > 0 and max(summary["tool_call_frequency"]) > 0
    episodes = summary["last_episodes"]
    assert len(episodes) == summary["episodes"] == 8  # 2 steps x 4 rollouts, each scored once
    for episode in episodes:
        replay = played_in_process(LAKE, episode["seed"], episode["actions"], max_turns=3, split=episode["split"])
        assert list(episode["rewards"]) == [r for _, r, _ in replay]
        assert episode["total_reward"] == pytest.approx(sum(episode["rewards"]), abs=1e-12)
        if replay:
            assert episode["reward_components"] == episode_totals(c for _, _, c in replay)
        else:  # the model answered without calling the tool: an episode of no step
            assert set(episode["reward_components"].values()) == {0.0}
    for step in range(2):
        scored = episodes[4 * step : 4 * step + 4]
        mean = sum(e["total_reward"] for e in scored) / 4
        assert summary["logged_env_reward"][step] == pytest.approx(mean, abs=1e-6)
        assert summary["logged_reward"][step] == pytest.approx(mean, abs=1e-6)  # components weigh 0
        for name, logged in summary["logged_components"].items():
            part = sum(e["reward_components"][f"{name}_reward"] for e in scored) / 4
            assert logged[step] == pytest.approx(part, abs=1e-6)
        episode_metrics = {key: values[step] for key, values in summary["logged_episode"].items()}
        assert episode_metrics == {
            "episode/unscored": 0.0,
            "episode/success_rate": pytest.approx(sum(e["success"] for e in scored) / 4),
            "episode/turns": pytest.approx(sum(len(e["actions"]) for e in scored) / 4),
            "episode/finished": pytest.approx(sum(e["termination_reason"] is not None for e in scored) / 4),
        }
    # A group whose rollouts scored differently gives GRPO a gradient: the weights moved.
    assert min(summary["frac_reward_zero_std"]) < 1
    assert summary["max_weight_change"] > 0


@pytest.fixture
def one_thread() -> Iterator[None]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared CPU: threads only contend
    yield
    torch.set_num_threads(threads)


#: glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4


@pytest.fixture
def heap_for_big_tensors() -> Iterator[None]:
    """Keep the large blocks torch frees in the heap for the next one, during a training run.

    On a CPU, TRL's chunked log-probabilities build temporaries of (tokens x vocabulary) floats,
    about 280 MB each here (49,152 tokens of vocabulary), dozens per step. glibc serves any block
    over 32 MiB with a fresh mmap and unmaps it on free, so the kernel faults in and zeroes every
    page of every temporary again: as many CPU seconds in the kernel as in the arithmetic. With
    mmap off and no trimming, freed blocks are reused. Afterwards: mmap back on, the thresholds
    where glibc's own adaptive ones top out (32 MiB, twice that for trimming), and the freed
    memory returned to the system. Only glibc has mallopt; elsewhere this does nothing.
    """
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        yield
        return
    libc = ctypes.CDLL(None)
    libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_MAX, 65536)  # glibc's default
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 64 << 20)
        libc.malloc_trim(0)


@pytest.mark.slow
def test_example_smoke_trains_on_envgym_envs(one_thread, heap_for_big_tensors, tmp_path: Path, capsys) -> None:
    """``examples/trl_grpo.py --smoke``: the script's ``main`` with those arguments, in this
    process (a subprocess would import torch, transformers and TRL again, a third of its time)."""
    example = load_example()
    assert example.main(["--smoke", "--output-dir", str(tmp_path)]) == 0
    check_trained_on_envgym(json.loads(capsys.readouterr().out), url=None)


@pytest.fixture(scope="module")
def lake_server() -> Iterator[Any]:
    from envgym.serve import Server

    with Server([LAKE], idle_timeout=120.0) as live:
        yield live


@pytest.mark.slow
def test_grpo_trains_over_envgym_serve(lake_server, one_thread, heap_for_big_tensors, tmp_path: Path) -> None:
    example = load_example()
    trainer, factory = example.build(example.SMOKE, url=lake_server.url, output_dir=str(tmp_path))
    try:
        summary = example.train(trainer, factory)
        # Every env instance is a session of the server: the episodes were played there.
        assert lake_server.active_sessions == len(factory.instances) >= 4
    finally:
        factory.close()
    check_trained_on_envgym(summary, url=lake_server.url)
    deadline = time.monotonic() + 30
    while lake_server.active_sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lake_server.active_sessions == 0  # close() ended every session


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("reset", "a name the TRL environment keeps"),
        ("act", "a name the TRL environment keeps"),
        ("_secret", "a name the TRL environment keeps"),
        ("read-file", "cannot be a method name"),
        (None, "cannot be"),
    ],
)
def test_env_tools_that_cannot_be_methods_are_refused_naming_tools_act(name: Any, message: str) -> None:
    info = {"tools": [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}]}
    with pytest.raises(ConfigError, match=message) as caught:
        envgym_trl._env_tools("envgym/Some-v0", info)
    assert "tools='act'" in str(caught.value)
