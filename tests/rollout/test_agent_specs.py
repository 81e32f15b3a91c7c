"""Agent specs with bad options: a clear ConfigError naming what the agent takes, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgym.errors import ConfigError, UnknownAgentError
from envgym.rollout import RandomAgent, RunConfig, Runner, make_agent


def test_known_options_build_the_agent() -> None:
    agent = make_agent("random:7")
    assert isinstance(agent, RandomAgent)


def test_an_unknown_option_names_the_options_the_agent_takes() -> None:
    with pytest.raises(ConfigError, match="agent 'random' has no option 'foo'. Its options: none."):
        make_agent("random", foo=1)
    with pytest.raises(ConfigError, match="agent 'oracle' has no option 'temperature'"):
        make_agent("oracle", temperature=0.5)


def test_an_option_the_spec_already_sets_is_refused() -> None:
    with pytest.raises(ConfigError, match="option 'model' is set by the agent spec"):
        make_agent("hf:smollm2", model="other")  # refused before any model loads


def test_unknown_kind_and_run_level_seed() -> None:
    with pytest.raises(UnknownAgentError, match="Did you mean 'random'"):
        make_agent("randon")
    with pytest.raises(ConfigError, match="comes from the run's seed"):
        RunConfig(env_id="envgym/FrozenLake-v0", agent="random", agent_options={"seed": 3})


def test_a_run_with_a_bad_option_writes_no_episode(tmp_path: Path) -> None:
    config = RunConfig(env_id="envgym/FrozenLake-v0", agent="random", agent_options={"foo": 1}, episodes=2)
    with pytest.raises(ConfigError, match="no option 'foo'"):
        Runner(config, out=tmp_path / "run").run()
    assert not (tmp_path / "run" / "episodes.jsonl").exists()
