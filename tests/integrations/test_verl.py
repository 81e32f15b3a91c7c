"""envgym's verl agent loop (``envgym_agent``) run through verl's real agent-loop classes.

What runs: verl 0.9.1's own ``AgentLoopBase`` (its Continuous Token builder merges each reply and
each observation into the token stream and masks them), ``AgentLoopOutput`` and its ``as_dict``
(the tensors verl batches, ``rm_scores`` among them), verl's agent-loop registry, and
``TokenOutput``; the loop is built with the keyword arguments verl's ``AgentLoopWorker`` passes
and awaited as it awaits ``run``. The rollout server is scripted (oracle replies, malformed
replies) or the tiny test model generating for real.

What does not run here, and why: verl's ``AgentLoopWorker``/``AgentLoopManager`` (Ray actors built
by hydra from a full trainer config), the vLLM/SGLang rollout servers (CUDA), and the PPO/GRPO
trainer (FSDP/Megatron workers on GPUs). verl is installed with ``--no-deps`` (it pins
transformers<5.11), so ``tensordict``, ``hydra-core`` and ``codetiming`` are missing; the driver
subprocess puts import stand-ins for exactly those three in place (``tests/support/verl_standins.py``:
each name raises if used; none is used on this path).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from oracle_episodes import oracle_episode

import envgym
from envgym.rewards.metrics import episode_totals
from envgym.rollout.prompting import Conversation, PromptConfig

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
#: Where scripts/setup.sh installs verl: off sys.path, since its wheel also ships top-level `tests`
#: and `scripts` packages; appended to the path where verl is imported.
VERL = Path(sys.prefix) / "opt" / "verl"


def replay(env_id: str, seed: int, replies: list[str]) -> list[float]:
    """The rewards envgym gives ``replies`` in-process, parsed as the harness parses them."""
    env = envgym.make(env_id)
    obs, info = env.reset(seed=seed)
    conv = Conversation(PromptConfig(), env_id, obs, info)
    rewards = []
    for reply in replies:
        rewards.append(float(env.step(conv.parse(reply).action)[1]))
    env.close()
    return rewards


def row(env_id: str, seed: int, **settings: Any) -> dict[str, Any]:
    return {
        "data_source": env_id,
        "prompt": [{"role": "user", "content": f"{env_id} seed {seed}"}],
        "agent_name": "envgym_agent",
        "extra_info": {"index": 0, "envgym": {"env_id": env_id, "seed": seed, **settings}},
    }


SOKOBAN, FROZEN = ("envgym/Sokoban-v0", 5), ("envgym/FrozenLake-v0", 2)


@pytest.fixture(scope="module")
def runs() -> dict[str, Any]:
    """Every scenario in one driver subprocess (verl's imports and the tiny model load once)."""
    actions, rewards, components, _ = oracle_episode(*SOKOBAN)
    scenarios = [
        {
            "name": "oracle",
            "dataset_row": list(SOKOBAN),
            "replies": [f"Plan: {a}. <action>{a}</action>" for a in actions],
            "max_assistant_turns": 20,
        },
        {
            "name": "malformed",
            "row": row("envgym/Wordle-v0", 3),
            "replies": ["no idea, sorry", "<action>crane</action>"],
            "max_assistant_turns": 2,
        },
        {
            "name": "system_from_row",
            "row": {**row(*FROZEN), "prompt": [{"role": "system", "content": "Be brief."}]},
            "replies": ["<action>up</action>"],
            "envgym": {"max_turns": 1},
        },
        {"name": "length", "row": row(*FROZEN), "replies": ["<action>left</action>"] * 50, "response_length": 64},
        {
            "name": "no_settings",
            "row": {"prompt": [{"role": "user", "content": "hi"}], "extra_info": {}},
            "replies": [],
        },
        {"name": "tiny", "row": row(*FROZEN), "tiny": 8, "max_assistant_turns": 3},
    ]
    done = subprocess.run(
        [sys.executable, str(SUPPORT / "verl_agent_loop_driver.py")],
        input=json.dumps({"scenarios": scenarios}),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(SUPPORT), "ENVGYM_TEST_VERL_PATH": str(VERL)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    out["oracle_expected"] = {"actions": actions, "rewards": rewards, "components": components}
    return out


def test_oracle_replies_earn_the_in_process_return_as_verls_reward(runs) -> None:
    got, expected = runs["results"]["oracle"], runs["oracle_expected"]
    ret = sum(expected["rewards"])
    assert got["reward_score"] == pytest.approx(ret, abs=1e-12)
    assert got["extra_fields"]["turn_scores"] == expected["rewards"]
    # verl's own as_dict puts the whole return on the last response token.
    assert got["rm_scores_last"] == pytest.approx(ret, abs=1e-6)
    assert got["rm_scores_sum"] == pytest.approx(ret, abs=1e-6)
    assert got["extra_fields"]["reward_components"] == pytest.approx(episode_totals(expected["components"]))
    assert got["extra_fields"]["reward_extra_info"] == {
        "success": 1.0,
        "turns": float(len(expected["actions"])),
        "format_ok": 1.0,
        "valid_action_rate": 1.0,
    }
    assert got["extra_fields"]["envgym"] == {"env_id": SOKOBAN[0], "seed": SOKOBAN[1], "termination_reason": "success"}
    n = len(expected["actions"])
    assert got["calls"] == n
    assert got["num_turns"] == n + (n - 1) + 1  # replies, observations, the prompt
    # The mask: model tokens are exactly the replies, environment tokens carry the observations.
    for action in expected["actions"]:
        assert f"<action>{action}</action>" in got["model_text"]
    assert "<action>" not in got["env_text"] and got["env_text"].count("<|im_start|>user") == n - 1
    assert 0 < got["mask_ones"] < got["response_len"]
    assert got["logprobs_len"] is None  # the scripted server reports none
    # The prompt: envgym's system message and the first observation, not the row's label.
    assert "<|im_start|>system\nYou are an agent acting in Sokoban" in got["prompt_text"]
    assert "seed 5" not in got["prompt_text"]
    # The row came from envgym.integrations.verl.dataset_rows.
    assert got["row"]["extra_info"]["envgym"] == {"env_id": SOKOBAN[0], "seed": SOKOBAN[1]}
    assert got["row"]["agent_name"] == "envgym_agent" and got["row"]["prompt"]
    assert got["metrics"]["generate_sequences"] >= 0 and got["metrics"]["tool_calls"] > 0


def test_a_malformed_reply_is_an_invalid_step_and_verls_turn_limit_ends_the_episode(runs) -> None:
    got = runs["results"]["malformed"]
    assert got["extra_fields"]["turn_scores"] == replay("envgym/Wordle-v0", 3, got["replies"])
    assert got["extra_fields"]["turn_scores"][0] < 0  # the env's invalid-action reward
    assert "Your last reply had no complete <action>...</action> block." in got["env_text"]
    assert "Invalid action 'no idea, sorry'" in got["second_prompt_text"]
    assert got["extra_fields"]["envgym"]["termination_reason"] == "max_turns"  # max_assistant_turns=2
    info = got["extra_fields"]["reward_extra_info"]
    assert info["turns"] == 2.0 and info["valid_action_rate"] == 0.5 and info["format_ok"] == 0.5


def test_a_system_message_in_the_row_replaces_envgyms_and_yaml_defaults_apply(runs) -> None:
    got = runs["results"]["system_from_row"]
    assert got["prompt_text"].startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert "You are an agent acting in" not in got["prompt_text"]
    assert got["calls"] == 1 and got["extra_fields"]["envgym"]["termination_reason"] == "max_turns"


def test_the_response_length_cuts_the_episode(runs) -> None:
    got = runs["results"]["length"]
    assert got["extra_fields"]["envgym"]["termination_reason"] == "length"
    assert got["response_len"] <= 64
    assert got["reward_score"] == pytest.approx(sum(got["extra_fields"]["turn_scores"]), abs=1e-12)
    assert got["calls"] == len(got["extra_fields"]["turn_scores"]) < 50


def test_a_row_without_envgym_settings_fails_with_the_fix(runs) -> None:
    error = runs["results"]["no_settings"]["error"]
    assert error.startswith("ConfigError:") and "extra_info['envgym']" in error and "dataset_rows" in error


def test_the_tiny_model_generates_and_envgym_scores_its_replies(runs) -> None:
    got = runs["results"]["tiny"]
    replies = got["replies"]
    assert 1 <= len(replies) <= 3 and got["calls"] == len(replies)
    assert got["extra_fields"]["turn_scores"] == replay(*FROZEN, replies)
    assert got["reward_score"] == pytest.approx(sum(got["extra_fields"]["turn_scores"]), abs=1e-12)
    assert got["logprobs_len"] == got["response_len"]  # log-probs kept, aligned to the response
    assert runs["standins"] == [m for m in ("tensordict", "hydra", "codetiming") if _missing(m)]


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


def test_dataset_rows_and_the_agent_loop_yaml_need_no_verl() -> None:
    from omegaconf import OmegaConf

    from envgym.errors import ConfigError
    from envgym.integrations import verl as envgym_verl

    rows = envgym_verl.dataset_rows("envgym/Wordle-v0", [4, 9], env_kwargs={"max_turns": 6})
    assert rows[1] == {
        "data_source": "envgym/Wordle-v0",
        "prompt": [{"role": "user", "content": "envgym/Wordle-v0 seed 9"}],
        "agent_name": "envgym_agent",
        "extra_info": {
            "index": 1,
            "split": "train",
            "envgym": {"env_id": "envgym/Wordle-v0", "seed": 9, "env_kwargs": {"max_turns": 6}},
        },
    }
    with pytest.raises(ConfigError, match="seed"):
        envgym_verl.dataset_rows("envgym/Wordle-v0", [True])
    # The YAML as verl reads it (OmegaConf.load of agent_loop_config_path).
    [entry] = OmegaConf.create(envgym_verl.agent_loop_yaml(prompt={"show_admissible": False}))
    assert entry.name == "envgym_agent" and entry._target_ == "envgym.integrations.verl.EnvgymAgentLoop"
    assert OmegaConf.to_container(entry.envgym) == {"prompt": {"show_admissible": False}}
    with pytest.raises(ConfigError, match="Did you mean 'env_kwargs'"):
        envgym_verl.agent_loop_yaml(env_kwarg={})


@pytest.mark.skipif(not _missing("tensordict"), reason="verl's dependencies are installed: the class builds")
def test_without_verls_dependencies_the_agent_loop_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.integrations import verl as envgym_verl

    monkeypatch.setattr(sys, "path", [*sys.path, str(VERL)])

    with pytest.raises(ImportError, match="needs verl with its own dependencies.*tensordict"):
        envgym_verl.EnvgymAgentLoop  # noqa: B018  (the attribute builds the class)


def test_example_smoke_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "verl_agent_loop.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("python -m verl.trainer.main_ppo ")
    assert "actor_rollout_ref.rollout.agent.default_agent_loop=envgym_agent" in done.stdout
    assert "6 rows and the agent-loop YAML" in done.stderr
