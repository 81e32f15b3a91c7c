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


# ----------------------------------------------------------------------------- module:Class, file.py:Class
AGENT_FILE = '''
from envgym.rollout import Agent, AgentOutput, Policy


class Echo(Agent):
    """Replies with its seed and its word, whatever it is asked."""

    def __init__(self, seed: int = 0, word: str = "up") -> None:
        self.seed, self.word = seed, word

    def act(self, batch):
        return [AgentOutput(text=self.word) for _ in batch]


class Still(Policy):
    def act(self, observation, info):
        return "up"


def helper():
    return 1
'''


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_agents.py"
    path.write_text(AGENT_FILE)
    return path


def test_a_file_spec_builds_the_class_with_the_run_seed_and_options(agent_file: Path) -> None:
    agent = make_agent(f"{agent_file}:Echo", seed=5, word="left")
    assert type(agent).__name__ == "Echo" and (agent.seed, agent.word) == (5, "left")
    # the same file again is the same module: one class
    assert type(make_agent(f"{agent_file}:Echo")) is type(agent)


def test_a_module_spec_builds_the_class(agent_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(agent_file.parent))
    agent = make_agent("my_agents:Echo", seed=2)
    assert type(agent).__name__ == "Echo" and agent.seed == 2


def test_a_file_spec_plays_a_run(agent_file: Path) -> None:
    result = Runner(RunConfig(env_id="envgym/FrozenLake-v0", agent=f"{agent_file}:Echo", episodes=2)).run()
    assert len(result.trajectories) == 2
    assert all(turn.action == "up" for t in result.trajectories for turn in t.turns)


def test_import_spec_errors_say_what_is_wrong(agent_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"no Python file .*my_agent\.py.*Did you mean 'my_agents\.py'"):
        make_agent(f"{agent_file.parent / 'my_agent.py'}:Echo")
    with pytest.raises(ConfigError, match=r"has no 'Eco'\. Did you mean 'Echo'\?.*Agent classes it holds: Echo"):
        make_agent(f"{agent_file}:Eco")
    with pytest.raises(ConfigError, match="names a function, which is not an agent: expected a subclass"):
        make_agent(f"{agent_file}:helper")
    with pytest.raises(ConfigError, match="the class Still, which is not an agent.*It is a Policy"):
        make_agent(f"{agent_file}:Still")
    with pytest.raises(ConfigError, match="Echo' has no option 'wrod'. Did you mean 'word'"):
        make_agent(f"{agent_file}:Echo", wrod="x")
    with pytest.raises(ConfigError, match="no module 'no_such_module_xyz' to import"):
        make_agent("no_such_module_xyz:Agent")
    with pytest.raises(ConfigError, match="no module 'hff'.*Did you mean 'hf'"):
        make_agent("hff:smollm2")
    with pytest.raises(ConfigError, match="Agent is abstract"):
        make_agent("envgym.rollout.agent:Agent")
    broken = agent_file.parent / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match="running .*broken.py' failed: RuntimeError: boom"):
        make_agent(f"{broken}:X")
    # a typo of a kind is still an unknown agent, not an import
    with pytest.raises(UnknownAgentError, match="Did you mean 'random'"):
        make_agent("randon:7")


def test_the_cli_refuses_a_bad_import_spec_before_running(agent_file: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from envgym.cli import app

    result = CliRunner().invoke(
        app, ["run", "envgym/FrozenLake-v0", "-a", f"{agent_file}:Eco", "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2 and "Did you mean 'Echo'" in result.output
    assert not (tmp_path / "r").exists()
    result = CliRunner().invoke(app, ["run", "envgym/FrozenLake-v0", "-a", f"{agent_file}:Echo", "-n", "2", "--json"])
    assert result.exit_code == 0, result.output
