"""The multi-agent base (TextAECEnv, helpers) and the AEC / Parallel checkers, broken envs included."""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
from typing import Any, ClassVar

import pytest
from pettingzoo import ParallelEnv

import envgym
from envgym.core import INFO_KEYS, InvalidAction, TerminationReason
from envgym.errors import EnvContractError, EnvgymError, InvalidKwargsError, ResetNeededError
from envgym.multiagent import (
    TextObservation,
    TextSpaces,
    UnknownAgentError,
    action_text,
    agent_info,
    shown_action,
)
from envgym.spaces import Text
from envgym.testing import BAD_ACTIONS, CheckReport, check_aec_env, check_parallel_env
from envgym.testing.multi_agent import (
    check_aec_invalid_run,
    check_parallel_bad_inputs,
    check_parallel_invalid_run,
    check_parallel_reset_info,
)

TTT = "envgym/TicTacToe-v0"


# ---------------------------------------------------------------------- a tiny parallel text env
class RockPaperScissors(TextSpaces, ParallelEnv):
    """Simultaneous rock-paper-scissors, first to two round wins (a test env, not registered).

    Invalid actions: the round is replayed; the invalid player pays ``invalid_penalty`` and is
    told why; after 3 invalid actions in a row it forfeits. Truncated after ``max_rounds`` steps.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "rock_paper_scissors_v0", "render_modes": []}
    MOVES = ("rock", "paper", "scissors")
    BEATS: ClassVar[dict[str, str]] = {"rock": "scissors", "paper": "rock", "scissors": "paper"}
    reward_components = ("round_reward", "invalid_action_reward")

    def __init__(self, *, max_rounds: int = 9, invalid_limit: int = 3) -> None:
        self.possible_agents = ["player_0", "player_1"]
        self._init_text_spaces(self.possible_agents)
        self.agents: list[str] = []
        self.max_rounds = max_rounds
        self.invalid_limit = invalid_limit
        self._ready = False
        self._task: dict[str, Any] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        rng = random.Random(f"rps:{seed}")
        self.agents = list(self.possible_agents)
        self._task = {"id": f"rps/{rng.getrandbits(32):08x}", "goal": "Win two rounds first.", "split": "train"}
        self._ready = True
        self.steps = 0
        self.score = dict.fromkeys(self.agents, 0)
        self.turns = dict.fromkeys(self.agents, 0)
        self.invalid = dict.fromkeys(self.agents, 0)
        self.streak = dict.fromkeys(self.agents, 0)
        self.notes = dict.fromkeys(self.agents, "Choose rock, paper or scissors.")
        comps = dict.fromkeys(self.reward_components, 0.0)
        infos = {a: self._info(a, comps, True, False, None) for a in self.agents}
        return {a: self._observe(a) for a in self.agents}, infos

    def state_text(self) -> str:
        return f"Score: player_0 {self.score['player_0']} - {self.score['player_1']} player_1."

    def _observe(self, agent: str) -> str:
        return f"{self.notes[agent]}\n{self.state_text()}"

    def _info(self, agent: str, comps: dict, valid: bool, success: bool, reason: Any) -> dict[str, Any]:
        return agent_info(
            self._task,
            admissible_actions=list(self.MOVES) if reason is None else [],
            action_valid=valid,
            reward_components=comps,
            success=success,
            termination_reason=reason,
            turn=self.turns[agent],
            invalid_actions=self.invalid[agent],
        )

    def sample_action(self, agent: str, rng: random.Random) -> str:
        return rng.choice(self.MOVES)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self._ready or not self.agents:
            raise ResetNeededError("RockPaperScissors.step() needs reset() first.")
        live = list(self.agents)
        self.steps += 1
        comps = {a: dict.fromkeys(self.reward_components, 0.0) for a in live}
        moves: dict[str, str] = {}
        valid = {}
        for agent in live:
            self.turns[agent] += 1
            action = actions.get(agent)
            try:
                text = action_text(action).lower()
                if text not in self.MOVES:
                    raise InvalidAction("expected rock, paper or scissors.")
                moves[agent] = text
                valid[agent] = True
                self.streak[agent] = 0
            except InvalidAction as err:
                valid[agent] = False
                self.invalid[agent] += 1
                self.streak[agent] += 1
                comps[agent]["invalid_action_reward"] = -0.1
                self.notes[agent] = f"Invalid action {shown_action(action)!r}: {err}"
        reasons: dict[str, TerminationReason | None] = dict.fromkeys(live)
        success = dict.fromkeys(live, False)
        forfeits = [a for a in live if self.streak[a] >= self.invalid_limit]
        if forfeits:
            for a in live:
                reasons[a] = TerminationReason.INVALID_LIMIT if a in forfeits else TerminationReason.SUCCESS
                success[a] = a not in forfeits
        elif len(moves) == len(live):
            a, b = live
            if self.BEATS[moves[a]] == moves[b]:
                winner = a
            elif self.BEATS[moves[b]] == moves[a]:
                winner = b
            else:
                winner = None
            for agent in live:
                other = moves[b] if agent == a else moves[a]
                self.notes[agent] = f"You played {moves[agent]}, the other played {other}."
            if winner is not None:
                self.score[winner] += 1
                loser = b if winner == a else a
                comps[winner]["round_reward"] = 1.0
                comps[loser]["round_reward"] = -1.0
                if self.score[winner] >= 2:
                    reasons = {winner: TerminationReason.SUCCESS, loser: TerminationReason.FAILURE}
                    success[winner] = True
        else:
            for agent in live:
                if valid[agent]:
                    self.notes[agent] = "The other player's action was invalid: the round is replayed."
        truncated = dict.fromkeys(live, False)
        if all(r is None for r in reasons.values()) and self.steps >= self.max_rounds:
            reasons = dict.fromkeys(live, TerminationReason.MAX_TURNS)
            truncated = dict.fromkeys(live, True)
        terminated = {a: reasons[a] is not None and not truncated[a] for a in live}
        obs = {a: self._observe(a) for a in live}
        rewards = {a: sum(comps[a].values()) for a in live}
        infos = {a: self._info(a, comps[a], valid[a], success[a], reasons[a]) for a in live}
        if any(reasons[a] is not None for a in live):
            self.agents = []
        return obs, rewards, terminated, truncated, infos

    def close(self) -> None:
        self._ready = False


class FreshSpacesRPS(RockPaperScissors):
    """Broken: a new space object on every call."""

    def observation_space(self, agent: str) -> Text:
        return Text()


class RaisingRPS(RockPaperScissors):
    """Broken: a non-string action crashes step."""

    def step(self, actions: dict[str, Any]) -> Any:
        for value in actions.values():
            if value is not None and not isinstance(value, str):
                raise TypeError("actions must be strings")
        return super().step(actions)


class InfoLessRPS(RockPaperScissors):
    """Broken: infos lack the success key."""

    def _info(self, *args: Any) -> dict[str, Any]:
        info = super()._info(*args)
        del info["success"]
        return info


class UnseededRPS(RockPaperScissors):
    """Broken: ignores the seed for its task id."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, infos = super().reset(seed=seed, options=options)
        task_id = f"rps/{random.getrandbits(32):08x}"
        self._task["id"] = task_id
        for info in infos.values():
            info["task"]["id"] = task_id
        return obs, infos


# ---------------------------------------------------------------------- broken AEC envs
def _ttt_class() -> type:
    from envgym.environments.games.tictactoe import TicTacToeAEC

    return TicTacToeAEC


def _broken_aec(kind: str) -> type:
    base = _ttt_class()

    class FreshSpaces(base):  # type: ignore[misc, valid-type]
        def action_space(self, agent: str) -> Text:
            return Text()

    class Raising(base):  # type: ignore[misc, valid-type]
        def _parse(self, agent: str, text: str) -> int:
            if text in self.legal_actions(agent):
                return super()._parse(agent, text)
            return int(text) - 1  # ValueError on garbage, IndexError out of range

    class Unseeded(base):  # type: ignore[misc, valid-type]
        def _new_game(self, rng: random.Random, options: dict[str, Any] | None) -> Any:
            return super()._new_game(random.Random(), options)

    class InfoLess(base):  # type: ignore[misc, valid-type]
        def _info(self, agent: str) -> dict[str, Any]:
            info = super()._info(agent)
            del info["turn"]
            return info

    class Endless(base):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(invalid_limit=10**9, **kwargs)

    return {
        "fresh_spaces": FreshSpaces,
        "raising": Raising,
        "unseeded": Unseeded,
        "info_less": InfoLess,
        "endless": Endless,
    }[kind]


# ---------------------------------------------------------------------- checkers
def test_check_parallel_env_passes_on_a_correct_env() -> None:
    report = check_parallel_env(RockPaperScissors)
    assert report.checks == [
        "pettingzoo.parallel_api_test",
        "pettingzoo.parallel_seed_test",
        "step_before_reset",
        "reset_info",
        "seeded_determinism",
        "bad_input_fuzz",
        "invalid_run_ends",
        "close_twice",
    ]
    assert report.steps > 3


@pytest.mark.parametrize(
    ("cls", "check"),
    [
        (FreshSpacesRPS, "parallel_api_test"),
        (RaisingRPS, "fuzz"),
        (InfoLessRPS, "info"),
        (UnseededRPS, "parallel_seed_test"),
    ],
)
def test_check_parallel_env_catches_broken_envs(cls: type, check: str) -> None:
    with pytest.raises(EnvContractError, match=rf"\[{check}\]"):
        check_parallel_env(cls)


def test_check_parallel_env_contract_checks_without_pettingzoo() -> None:
    with pytest.raises(EnvContractError, match=r"\[determinism\]"):
        check_parallel_env(UnseededRPS, pettingzoo_checks=False)
    with pytest.raises(EnvContractError, match=r"\[spaces\]"):
        check_parallel_env(FreshSpacesRPS, pettingzoo_checks=False)


def test_check_aec_env_passes_on_tictactoe_via_every_entry_form() -> None:
    by_id = check_aec_env(TTT)
    assert by_id.checks == [
        "pettingzoo.api_test",
        "pettingzoo.seed_test",
        "step_before_reset",
        "reset_info",
        "seeded_determinism",
        "bad_input_fuzz",
        "invalid_run_ends",
        "close_twice",
    ]
    assert by_id.steps >= 15  # three seeded games of at least five moves
    assert envgym.check_aec_env(envgym.make_aec(TTT, invalid_limit=2), pettingzoo_checks=False).checks
    assert check_aec_env(_ttt_class(), seeds=(4, 5)).env_id == "TicTacToeAEC"


@pytest.mark.parametrize(
    ("kind", "check"),
    [
        ("fresh_spaces", "api_test"),
        ("raising", "api_test"),
        ("unseeded", "seed_test"),
        ("info_less", "info"),
    ],
)
def test_check_aec_env_catches_broken_envs(kind: str, check: str) -> None:
    with pytest.raises(EnvContractError, match=rf"\[{check}\]"):
        check_aec_env(_broken_aec(kind))


def test_check_aec_env_contract_checks_without_pettingzoo() -> None:
    with pytest.raises(EnvContractError, match=r"\[fuzz\].*raised"):
        check_aec_env(_broken_aec("raising"), pettingzoo_checks=False)
    with pytest.raises(EnvContractError, match=r"\[determinism\]"):
        check_aec_env(_broken_aec("unseeded"), pettingzoo_checks=False)
    with pytest.raises(EnvContractError, match=r"\[spaces\]"):
        check_aec_env(_broken_aec("fresh_spaces"), pettingzoo_checks=False)
    with pytest.raises(EnvContractError, match=r"\[invalid_run\]"):
        check_aec_env(_broken_aec("endless"), pettingzoo_checks=False, fuzz=False, max_steps=300)


def test_named_multi_agent_checks_run_on_their_own() -> None:
    report = CheckReport("rps")
    env = RockPaperScissors()
    check_parallel_reset_info(env, "rps", 0, report)
    check_parallel_bad_inputs(env, "rps", 0, report)
    check_parallel_invalid_run(env, "rps", 0, 1_000, report)
    assert report.checks == ["reset_info", "bad_input_fuzz", "invalid_run_ends"]
    with pytest.raises(EnvContractError, match=r"\[invalid_run\]"):
        check_aec_invalid_run(_broken_aec("endless")(), "endless", 0, 300, CheckReport("endless"))


def test_checkers_need_two_seeds() -> None:
    with pytest.raises(ValueError, match="two seeds"):
        check_aec_env(TTT, seeds=(1,), pettingzoo_checks=False)


# ---------------------------------------------------------------------- the AEC base
def _play(env: Any, moves: list[Any]) -> None:
    for move in moves:
        env.step(move)


def test_reset_gives_every_agent_the_info_contract_and_cached_spaces() -> None:
    env = envgym.make_aec(TTT)
    env.reset(seed=7)
    assert env.agents == ["player_0", "player_1"] and env.agent_selection == "player_0"
    for agent in env.agents:
        info = env.infos[agent]
        assert set(INFO_KEYS) <= set(info)
        assert info["task"]["seed"] == 7 and info["turn"] == 0 and info["termination_reason"] is None
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)
        assert isinstance(env.observation_space(agent), Text)
    assert env.infos["player_0"]["admissible_actions"] == ["a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3", "c3"]
    assert env.infos["player_1"]["admissible_actions"] == []  # not its turn
    with pytest.raises(UnknownAgentError, match="Did you mean 'player_1'"):
        env.observation_space("player_11")


def test_invalid_move_keeps_the_turn_explains_and_charges() -> None:
    env = envgym.make_aec(TTT)
    env.reset(seed=0)
    env.step("b2")
    board = env.state_text()
    env.step("b2")  # taken
    assert env.agent_selection == "player_1"
    assert env.state_text() == board
    obs, reward, term, trunc, info = env.last()
    assert "Invalid action 'b2': b2 is already taken by X" in obs
    assert "1 of 3 invalid moves in a row" in obs
    assert reward == pytest.approx(-0.1) and not term and not trunc
    assert info["action_valid"] is False and info["invalid_actions"] == 1 and info["turn"] == 1
    assert info["reward_components"]["invalid_action_reward"] == pytest.approx(-0.1)
    env.step(None)  # a live agent's None is an ordinary invalid move
    assert env.agent_selection == "player_1" and env.infos["player_1"]["invalid_actions"] == 2
    env.step("<action>a1</action>")
    assert env.agent_selection == "player_0"
    assert env.infos["player_1"]["action_valid"] is True
    assert "player_1 (O) played a1." in env.observe("player_0")


def test_invalid_streak_forfeits_and_pettingzoo_dead_step_rules() -> None:
    env = envgym.make_aec(TTT, invalid_limit=2)
    env.reset(seed=0)
    _play(env, ["zz", "b2", "zz", "qq"])  # the streak resets after a valid move; then two in a row
    assert all(env.terminations.values())
    p0, p1 = env.infos["player_0"], env.infos["player_1"]
    assert p1["termination_reason"] == TerminationReason.INVALID_LIMIT.value and p1["success"] is False
    assert p0["termination_reason"] == TerminationReason.SUCCESS.value and p0["success"] is True
    assert p0["reward_components"]["success_reward"] == 1.0
    assert p1["reward_components"]["loss_reward"] == -1.0
    assert p0["admissible_actions"] == [] and p1["admissible_actions"] == []
    assert "you forfeit" in env.observe("player_1") and "forfeited" in env.observe("player_0")
    rewards = {}
    for agent in env.agent_iter():
        _, reward, term, _, _ = env.last()
        assert term
        rewards[agent] = reward
        with pytest.raises(ValueError, match="only valid action is None"):
            env.step("a1")
        env.step(None)
    # Each step restarts the mover's sum: the first "qq" penalty was already seen via last().
    assert rewards == {"player_0": pytest.approx(1.0), "player_1": pytest.approx(-1.0 - 0.1)}
    assert env.agents == []
    with pytest.raises(ResetNeededError, match="reset"):
        env.step("a1")


def test_last_reward_is_the_sum_since_the_agent_last_acted() -> None:
    env = envgym.make_aec(TTT)
    env.reset(seed=0)
    # X: a1 b1 c1 wins; O makes an invalid move in between.
    _play(env, ["a1", "a2", "b1", "nope", "b2", "c1"])
    assert env.infos["player_0"]["termination_reason"] == "success"
    assert env.infos["player_1"]["termination_reason"] == "failure"
    assert env.agent_selection == "player_1"  # the loser hears about it first
    _, reward, term, _, info = env.last()
    assert term and reward == pytest.approx(-1.0)
    assert sum(info["reward_components"].values()) == pytest.approx(reward)
    assert "player_0 wins" in env.observe("player_1") and "Game over: player_0 (X) won." in env.observe("player_1")


def test_step_before_reset_kwargs_and_render() -> None:
    env = envgym.make_aec(TTT, render_mode="ansi")
    with pytest.raises(ResetNeededError):
        env.step("a1")
    with pytest.raises(ResetNeededError):
        env.observe("player_0")
    env.reset(seed=1)
    assert env.render() == env.state_text() and "a   b   c" in env.render()
    env.close()
    env.close()
    with pytest.raises(InvalidKwargsError, match="Did you mean 'invalid_limit'"):
        envgym.make_aec(TTT, invalid_limt=3)
    with pytest.raises(InvalidKwargsError, match="positive integer"):
        envgym.make_aec(TTT, invalid_limit=0)
    with pytest.raises(InvalidKwargsError, match="render_mode"):
        envgym.make_aec(TTT, render_mode="rgb_array")
    with pytest.raises(EnvgymError, match="make_aec"):
        envgym.make_parallel(TTT)


def test_intro_shown_until_the_agent_acts_and_reset_is_deterministic() -> None:
    env = envgym.make_aec(TTT)
    env.reset(seed=3)
    assert "Tic-tac-toe on a 3x3 board" in env.observe("player_0")
    env.step("b2")
    assert "Tic-tac-toe on a 3x3 board" not in env.observe("player_0")
    assert "Tic-tac-toe on a 3x3 board" in env.observe("player_1")
    first = env.infos["player_0"]["task"]["id"]
    env.reset(seed=3)
    assert env.infos["player_0"]["task"]["id"] == first
    env.reset(seed=4)
    assert env.infos["player_0"]["task"]["id"] != first
    env.reset()  # unseeded resets still work and give fresh task ids
    assert env.infos["player_0"]["task"]["seed"] is not None


# ---------------------------------------------------------------------- helpers
def test_text_observation_is_a_plain_string_with_a_dtype() -> None:
    obs = TextObservation("board\nX . O")
    assert isinstance(obs, str) and obs == "board\nX . O" and hash(obs) == hash("board\nX . O")
    assert obs.dtype == Text().dtype
    assert json.loads(json.dumps({"o": obs})) == {"o": "board\nX . O"}
    assert pickle.loads(pickle.dumps(obs)) == obs
    assert repr(obs) == repr("board\nX . O")


@pytest.mark.parametrize("bad", BAD_ACTIONS)
def test_action_text_accepts_text_and_rejects_the_rest(bad: Any) -> None:
    if isinstance(bad, (str, bytes)):
        assert isinstance(action_text(bad), str)
    else:
        with pytest.raises(InvalidAction, match="expected the action as a string"):
            action_text(bad)
    assert len(shown_action(bad)) <= 60


def test_agent_info_has_every_standard_key() -> None:
    info = agent_info(
        {"id": "t", "goal": "g", "split": "train"},
        admissible_actions=("a",),  # type: ignore[arg-type]
        action_valid=True,
        reward_components={"x_reward": 1},
        success=False,
        termination_reason=TerminationReason.FAILURE,
        turn=2,
        invalid_actions=0,
        extra_key=5,
    )
    assert set(INFO_KEYS) <= set(info)
    assert info["termination_reason"] == "failure" and info["admissible_actions"] == ["a"]
    assert info["reward_components"] == {"x_reward": 1.0} and isinstance(info["reward_components"]["x_reward"], float)
    assert info["extra_key"] == 5


def test_the_multiagent_base_does_not_import_the_checkers() -> None:
    # envgym.testing sits above envgym.multiagent: importing the base must not load the checkers.
    code = "import sys, envgym.multiagent; sys.exit('envgym.testing' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
