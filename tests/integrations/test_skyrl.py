"""envgym envs as SkyRL-gym text envs, driven in the order SkyRL's generator calls a ``BaseTextEnv``.

SkyRL's generator (skyrl-train's ``SkyRLGymGenerator.agent_loop``, not installed here: it needs
vLLM/SGLang and Ray) does, per trajectory: ``skyrl_gym.make(env_class, env_config=...,
extras=row_extras)`` with its ``max_turns`` written into the extras, ``env.init(deepcopy(prompt))``,
then ``env.step(reply)`` until ``done`` (each step's reward at the end of its turn, so they add up),
``env.get_metrics()`` and ``env.close()``. :func:`skyrl_episode` does exactly that.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import skyrl_gym
from oracle_episodes import oracle_episode

import envgym
from envgym.errors import ConfigError, ResetNeededError, UnknownEnvError
from envgym.integrations import skyrl as envgym_skyrl
from envgym.rewards.metrics import episode_totals, metric_key

ROOT = Path(__file__).resolve().parents[2]


def skyrl_episode(row: dict[str, Any], replies, *, max_turns: int = 20, env_config=None) -> dict[str, Any]:
    """One trajectory in SkyRL's generator order; ``replies(chat) -> str`` plays the model."""
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = max_turns
    env = skyrl_gym.make(row["env_class"], env_config=env_config or {}, extras=extras)
    chat, init_meta = env.init(copy.deepcopy(row["prompt"]))
    first_chat = copy.deepcopy(chat)
    steps, done = [], False
    try:
        while not done:
            reply = replies(chat)
            out = env.step(reply)
            steps.append(out)
            done = out["done"]
            chat = chat + [{"role": "assistant", "content": reply}, *out["observations"]]
        metrics = env.get_metrics()
    finally:
        env.close()
    return {"first_chat": first_chat, "init": init_meta, "steps": steps, "metrics": metrics, "chat": chat}


def scripted(texts):
    it = iter(texts)
    return lambda chat: next(it)


@pytest.mark.parametrize(("env_id", "seed"), [("envgym/Sokoban-v0", 5), ("envgym/FrozenLake-v0", 3)])
def test_oracle_replies_earn_the_in_process_return(env_id: str, seed: int) -> None:
    actions, rewards, components, info = oracle_episode(env_id, seed)
    row = envgym_skyrl.dataset_rows(env_id, [seed])[0]
    # The model writes some reasoning, then the action in envgym's tags, as the harness asks.
    ep = skyrl_episode(row, scripted(f"Let me think. <action>{a}</action>" for a in actions))

    assert [s["reward"] for s in ep["steps"]] == rewards
    assert sum(s["reward"] for s in ep["steps"]) == pytest.approx(sum(rewards), abs=1e-12)
    assert len(ep["steps"]) == len(actions)
    last = ep["steps"][-1]
    assert last["done"] and last["observations"] == []
    assert last["metadata"]["termination_reason"] == str(info["termination_reason"]) == "success"
    assert last["metadata"]["success"] is True
    assert [s["metadata"]["action"] for s in ep["steps"]] == actions
    assert [s["metadata"]["reward_components"] for s in ep["steps"]] == components
    metrics = ep["metrics"]
    assert metrics["episode/return"] == pytest.approx(sum(rewards), abs=1e-12)
    assert metrics["episode/success_rate"] == 1.0
    assert metrics["episode/turns"] == len(actions)
    assert metrics["episode/format_ok"] == metrics["episode/valid_action_rate"] == 1.0
    for name, total in episode_totals(components).items():
        assert metrics[metric_key(name)] == pytest.approx(total, abs=1e-12)
    # init: envgym's system prompt, then the first observation; the task travels in the metadata.
    assert [m["role"] for m in ep["first_chat"]] == ["system", "user"]
    assert ep["init"]["env_id"] == env_id and ep["init"]["seed"] == seed
    assert ep["init"]["task"]["seed"] == seed
    # Every observation comes back as one user message: roles alternate as chat templates need.
    roles = [m["role"] for m in ep["chat"]]
    assert roles[1:] == ["user", "assistant"] * len(actions)


def test_a_malformed_reply_is_an_invalid_step_with_feedback() -> None:
    env_id = "envgym/Wordle-v0"
    reference = envgym.make(env_id)
    reference.reset(seed=3)
    _, invalid_reward, *_ = reference.step("no idea, sorry")
    reference.close()
    row = envgym_skyrl.dataset_rows(env_id, [3])[0]

    ep = skyrl_episode(row, scripted(["no idea, sorry", "<action>crane</action>"]), max_turns=2)

    bad, good = ep["steps"]
    assert bad["reward"] == invalid_reward < 0
    assert bad["done"] is False
    assert bad["metadata"]["action_valid"] is False and bad["metadata"]["format_ok"] is False
    feedback = bad["observations"][0]
    assert feedback["role"] == "user"
    assert feedback["content"].startswith("Your last reply had no complete <action>...</action> block.")
    assert "Invalid action" in feedback["content"]
    assert good["metadata"]["action_valid"] is True and good["metadata"]["action"] == "crane"
    # The generator's max_turns (2) ended the episode, as the harness's turn limit does.
    assert good["done"] is True
    assert good["metadata"]["termination_reason"] == "max_turns"
    assert good["metadata"]["truncated_by"] == "harness_max_turns"
    assert ep["metrics"]["episode/valid_action_rate"] == 0.5
    assert ep["metrics"]["episode/format_ok"] == 0.5


def test_a_dataset_prompt_with_a_system_message_replaces_envgyms() -> None:
    row = envgym_skyrl.dataset_rows("envgym/FrozenLake-v0", [1])[0]
    row["prompt"] = [{"role": "system", "content": "Be brief."}]
    env = skyrl_gym.make("envgym", env_config={}, extras={"env_id": "envgym/FrozenLake-v0", "seed": 1})
    chat, _ = env.init(row["prompt"])
    env.close()
    assert [m["role"] for m in chat] == ["system", "user"]
    assert chat[0]["content"] == "Be brief."


def test_config_defaults_under_row_values_and_bad_settings_fail_clearly() -> None:
    # The YAML block gives defaults (env kwargs, prompt fields); the row's seed and id win.
    config = {"env_id": "envgym/Sokoban-v0", "seed": 1, "prompt": {"show_admissible": False}}
    env = skyrl_gym.make(
        "envgym", env_config=config, extras={"env_id": "envgym/FrozenLake-v0", "seed": 4, "data_source": "x"}
    )
    chat, meta = env.init([])
    env.close()
    assert meta["env_id"] == "envgym/FrozenLake-v0" and meta["seed"] == 4
    assert "Valid actions:" not in chat[-1]["content"]

    with pytest.raises(ConfigError, match="no env_id"):
        skyrl_gym.make("envgym", env_config={}, extras={"seed": 1})
    with pytest.raises(ConfigError, match="unknown envgym config key 'env_kwarg'.*Did you mean 'env_kwargs'"):
        skyrl_gym.make("envgym", env_config={"env_kwarg": {}}, extras={"env_id": "envgym/Wordle-v0"})
    with pytest.raises(ConfigError, match="unknown key 'seeds'. Did you mean 'seed'"):
        skyrl_gym.make("envgym", env_config={}, extras={"env_id": "envgym/Wordle-v0", "seeds": 3})
    with pytest.raises(ConfigError, match="seed must be an integer"):
        skyrl_gym.make("envgym", env_config={}, extras={"env_id": "envgym/Wordle-v0", "seed": "7"})
    with pytest.raises(UnknownEnvError, match="Wordle-v0"):
        skyrl_gym.make("envgym", env_config={}, extras={"env_id": "envgym/Wordel-v0"})
    with pytest.raises(ConfigError, match="PromptConfig|prompt config key"):
        skyrl_gym.make("envgym", env_config={"prompt": {"histroy": "full"}}, extras={"env_id": "envgym/Wordle-v0"})


def test_step_after_the_end_raises() -> None:
    env = skyrl_gym.make("envgym", env_config={}, extras={"env_id": "envgym/Wordle-v0", "seed": 0, "max_turns": 1})
    env.init([])
    assert env.step("<action>crane</action>")["done"] is True
    with pytest.raises(ResetNeededError):
        env.step("<action>slate</action>")
    env.close()
    env.close()  # closing twice is harmless


def test_register_a_named_env_class_with_defaults() -> None:
    name = "envgym-test-frozenlake"
    envgym_skyrl.register(name, env_id="envgym/FrozenLake-v0", env_kwargs={"size": 4})
    envgym_skyrl.register(name, env_id="envgym/FrozenLake-v0", env_kwargs={"size": 4})  # same: nothing to do
    try:
        env = skyrl_gym.make(name, env_config={}, extras={"seed": 2})
        _, meta = env.init([])
        env.close()
        assert meta["env_id"] == "envgym/FrozenLake-v0" and meta["task"]["seed"] == 2
        with pytest.raises(ConfigError, match="already has an env named"):
            envgym_skyrl.register(name, env_id="envgym/Wordle-v0")
        with pytest.raises(ConfigError, match="unknown envgym"):
            envgym_skyrl.register("envgym-test-other", envid="envgym/Wordle-v0")
    finally:
        skyrl_gym.envs.registration.deregister(name)


def test_dataset_rows() -> None:
    rows = envgym_skyrl.dataset_rows("envgym/Wordle-v0", range(3), env_kwargs={"max_turns": 6})
    assert [r["seed"] for r in rows] == [0, 1, 2]
    assert rows[0] == {
        "data_source": "envgym/Wordle-v0",
        "prompt": [],
        "env_class": "envgym",
        "env_id": "envgym/Wordle-v0",
        "seed": 0,
        "env_kwargs": {"max_turns": 6},
    }
    with pytest.raises(ConfigError, match="seed"):
        envgym_skyrl.dataset_rows("envgym/Wordle-v0", [-1])


@pytest.fixture(scope="module")
def tiny_lm():
    pytest.importorskip("torch")
    from envgym import models

    return models.tiny_causal_lm(seed=0)


def test_a_real_generation_loop_with_the_tiny_model(tiny_lm) -> None:
    """The tiny model answers three turns; every reward is the one envgym gives that reply in-process."""
    import torch

    model, tokenizer = tiny_lm
    env_id, seed = "envgym/FrozenLake-v0", 2

    def generate(chat):
        ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        return tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)

    ep = skyrl_episode(envgym_skyrl.dataset_rows(env_id, [seed])[0], generate, max_turns=3)

    replies = [m["content"] for m in ep["chat"] if m["role"] == "assistant"]
    assert 1 <= len(replies) <= 3 and all(isinstance(r, str) for r in replies)
    assert ep["metrics"]["episode/turns"] == len(replies)
    # Replay the parsed actions in a fresh in-process env: same rewards, step by step.
    env = envgym.make(env_id)
    env.reset(seed=seed)
    replayed = [float(env.step(s["metadata"]["action"])[1]) for s in ep["steps"]]
    env.close()
    assert [s["reward"] for s in ep["steps"]] == replayed
    assert ep["metrics"]["episode/return"] == pytest.approx(sum(replayed), abs=1e-12)


@pytest.mark.slow
def test_example_smoke_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "skyrl_env.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert len(result["episodes"]) == 2
    for episode in result["episodes"]:
        assert 1 <= len(episode["rewards"]) <= 3
        assert episode["metrics"]["episode/return"] == pytest.approx(sum(episode["rewards"]), abs=1e-9)
    assert "episode/return" in result["aggregate"]


@pytest.fixture(scope="module")
def sokoban_server():
    from envgym.serve import Server

    with Server(["envgym/Sokoban-v0"], idle_timeout=60.0) as live:
        yield live


def test_url_plays_the_episode_on_envgym_serve(sokoban_server) -> None:
    """``url=`` in the row: the same oracle replies earn the same rewards from a served env."""
    env_id, seed = "envgym/Sokoban-v0", 5
    actions, rewards, components, _ = oracle_episode(env_id, seed)
    row = envgym_skyrl.dataset_rows(env_id, [seed], url=sokoban_server.url)[0]

    ep = skyrl_episode(row, scripted(f"<action>{a}</action>" for a in actions))

    assert [s["reward"] for s in ep["steps"]] == rewards
    assert [s["metadata"]["reward_components"] for s in ep["steps"]] == components
    assert ep["steps"][-1]["metadata"]["termination_reason"] == "success"
    assert ep["init"]["task"]["seed"] == seed


def test_row_values_read_from_parquet_arrive_as_plain_data() -> None:
    """SkyRL reads its dataset with pandas: a seed comes as numpy.int64, kwargs lists as arrays."""
    np = pytest.importorskip("numpy")
    extras = {"env_id": "envgym/FrozenLake-v0", "seed": np.int64(4), "env_kwargs": {"size": np.int64(4)}}
    env = skyrl_gym.make("envgym", env_config={}, extras=extras)
    _, meta = env.init([])
    env.close()
    assert meta["seed"] == 4 and type(meta["seed"]) is int
    assert meta["task"]["seed"] == 4
