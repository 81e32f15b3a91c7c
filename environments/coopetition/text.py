"""The LLM view of the coopetition games: every agent reads the game in words and answers in text.

:class:`CoopTextEnv` (``envgym.make_parallel("envgym/Coop-<Name>-Text-v0")``) is a PettingZoo
Parallel environment on the same :class:`~.game.Game` and the same round machinery
(:class:`~.api._Episode`) as the numeric views, so rewards, terminations, splits and the
reference's info numbers are the numeric views' exactly; only observations and actions are text.

Answers (lenient where unambiguous, strict otherwise):

* the contribution is the one number in the answer, after the usual cleaning of an
  ``<action>...</action>`` block (:func:`envgym.core.extract_action`): ``<action>40</action>``,
  ``contribute 40``, ``I contribute 40.5.``, ``contribution: 40``; ``all`` / ``everything`` /
  ``max`` mean the whole endowment and ``nothing`` / ``none`` / ``zero`` mean 0 when no number is
  given;
* invalid: no number, several different numbers, a number outside ``[0, e_i]``, a percentage,
  anything that is not text;
* a message to the others (``messages=True``) follows ``say:`` (or ``message:``) inside the
  answer, ``<action>40 say: let's both cooperate</action>``, or sits in a ``<message>`` block
  of the raw answer; it is cleaned (control characters dropped, whitespace collapsed) and cut to
  ``max_message_chars``, and the others read it in their next observation (after a played round
  only: an unplayed round delivers nothing). With ``messages=False`` a message is ignored and
  the sender is told so.

Invalid answers follow :mod:`.api`: the round is not played, nothing changes, every reward is 0,
``info["invalid_reason"]`` maps each offender to why, and each agent's next observation says what
went wrong (its own reason, or whose answer held the round up); after ``invalid_limit`` invalid
answers in a row from one agent the episode ends (``invalid_limit``).
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from envgym.environments.coopetition.api import COMPONENTS, DEFAULT_INVALID_LIMIT, _Episode, env_card_of
from envgym.environments.coopetition.game import MECHANISMS
from pettingzoo import ParallelEnv

from envgym.core import InvalidAction, TerminationReason
from envgym.errors import ConfigError, ResetNeededError
from envgym.multiagent.text import TextObservation, TextSpaces, action_text, agent_info, shown_action, unknown_agent

__all__ = ["CoopTextEnv", "parse_answer", "trust_words"]

#: Message markers inside an answer: ``40 say: hello``.
_MARKER = re.compile(r"(?:^|[\s,;.!(])(?:say|says|message|msg|tell them)\s*[:=-]", re.IGNORECASE)
_MESSAGE_BLOCK = re.compile(r"<\s*message\s*>(.*?)(?:<\s*/\s*message\s*>|$)", re.IGNORECASE | re.DOTALL)
_NUMBER = re.compile(r"(?<![\w.])([-+]?)(\d{1,3}(?:,\d{3})+(?![\d])|\d+(?:\.\d+)?|\.\d+)(?!\w)(\s*%)?")
_ALL = frozenset({"all", "everything", "max", "maximum", "full", "whole"})
_NONE = frozenset({"nothing", "none", "zero"})
_WORD = re.compile(r"[a-z]+")
_SAMPLE_MESSAGES = ("let's cooperate", "I will match you", "trust me", "I am keeping more this time", "fair split?")

REWARD_MODE_WORDS = {
    "private": "your reward is your own payoff",
    "integrated": (
        "your reward is your payoff plus the others' payoffs, each weighted by how much you trust and depend on them"
    ),
    "cooperative": "every agent gets the same reward: the mean over the team of those trust-weighted utilities",
}


def _fmt(value: float) -> str:
    """A number as people write it: ``40``, ``40.5``, ``0.62``."""
    text = f"{float(value):.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def trust_words(trust: float) -> str:
    """Trust in ``[0, 1]`` in words."""
    for bound, word in ((0.2, "very low"), (0.4, "low"), (0.6, "moderate"), (0.8, "high")):
        if trust < bound:
            return word
    return "very high"


def _damage_words(damage: float) -> str:
    for bound, word in ((0.05, "none"), (0.2, "low"), (0.5, "moderate")):
        if damage < bound:
            return word
    return "high"


def _clean_message(text: str) -> str:
    kept = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    return " ".join(kept.split()).strip().strip("\"'").strip()


def parse_answer(action: Any, endowment: float) -> tuple[float, str | None]:
    """``(contribution, message or None)`` of one answer; raises :class:`InvalidAction` saying why.

    See the module docstring for the accepted forms.
    """
    if isinstance(action, (bytes, bytearray)):
        raw = bytes(action).decode("utf-8", errors="replace")
    elif isinstance(action, str):
        raw = action
    else:
        action_text(action)  # raises the shared "expected the action as a string" error
        raw = ""
    message: str | None = None
    blocks = _MESSAGE_BLOCK.findall(raw)
    if blocks:
        message = blocks[-1]
        raw = _MESSAGE_BLOCK.sub(" ", raw)
    text = action_text(raw)
    marker = _MARKER.search(text)
    if marker is not None:
        if message is not None:
            raise InvalidAction("two messages (a <message> block and 'say:'); send one.")
        message = text[marker.end() :]
        text = text[: marker.start()]
    numbers = [(sign, digits, pct) for sign, digits, pct in _NUMBER.findall(text)]
    amount = f"a number from 0 to {_fmt(endowment)}"
    if not numbers:
        words = set(_WORD.findall(text.lower()))
        if words & _ALL and not words & _NONE:
            return float(endowment), (None if message is None else _clean_message(message))
        if words & _NONE and not words & _ALL:
            return 0.0, (None if message is None else _clean_message(message))
        shown = repr(shown_action(text)) if text else "an empty answer"
        raise InvalidAction(f"no contribution found in {shown}; answer with {amount}, e.g. <action>40</action>.")
    values = {float(sign + digits.replace(",", "")) for sign, digits, _ in numbers}
    if len(values) > 1:
        listed = ", ".join(_fmt(v) for v in sorted(values))
        raise InvalidAction(
            f"several numbers ({listed}) in the answer; give one contribution, e.g. <action>40</action>, and put "
            "anything else after 'say:'."
        )
    if any(pct for _, _, pct in numbers):
        raise InvalidAction(f"give the contribution as an amount ({amount}), not a percentage.")
    value = values.pop()
    if not 0.0 <= value <= float(endowment):
        raise InvalidAction(f"contribution {_fmt(value)} is outside your range; answer with {amount}.")
    return value, (None if message is None else _clean_message(message))


class CoopTextEnv(TextSpaces, ParallelEnv[str, str, str]):
    """A Coopetition-Gym game for LLM agents: the round, history and trust in words; answers in text.

    **Description.** The game named by ``game`` (its rules: the **Game.** section of the id's card)
    played by LLM agents through PettingZoo's Parallel API, optionally talking to each other.

    **Observation.** Per agent, a ``str``: the game and the agent's role, its endowment and what a
    contribution does, the reward mode, the round and horizon, the last ``history_rounds`` rounds'
    contributions of everyone, the agent's trust toward each other agent and the reputation
    damage it holds against them (words and numbers), its last reward and payoff, the messages
    the others sent last round (``messages=True``), and why the last round was not played when
    an answer was invalid.

    **Actions.** Text holding one contribution in ``[0, e_i]`` (``<action>40</action>``,
    ``contribute 40``), optionally with ``say: <message>`` (see the module docstring).

    **Reward components.** ``payoff_reward`` (the agent's own payoff) and ``social_reward`` (what
    the reward mode adds: 0 in the private mode), as :class:`~.api.CoopParallelEnv`.

    **Reward basis.** ``payoff_reward`` and ``social_reward``: each agent's reward is their sum (in
    every reward mode), so none is diagnostic.

    **Episode end.** The game's own early termination (``failure`` or ``success`` per game), the
    horizon (``max_turns``), or ``invalid_limit`` invalid answers in a row from one agent.

    **Arguments.**

    * ``game``: the game's name (the registry passes it).
    * ``messages``: let agents send each other a short message every round.
    * ``max_message_chars``: longest message delivered (longer ones are cut).
    * ``history_rounds``: how many past rounds the observation lists (>= 1).
    * ``split``, ``invalid_limit``, ``render_mode``: as :class:`~.api.CoopParallelEnv`.
    * ``kwargs``: the game's parameters and ``reward_mode`` / ``normalize`` / ``reward_scale``.

    **Version history.** ``v0``: first release.
    """

    #: The oracle's module: ``envgym.agents.solvers.coopetition``.
    name: ClassVar[str] = "coopetition"
    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi"],
        "name": "coopetition_text_v0",
        "is_parallelizable": True,
    }
    reward_components = COMPONENTS
    reward_basis = COMPONENTS  # their sum is each agent's reward: none is diagnostic

    @classmethod
    def env_card(cls, kwargs: Mapping[str, Any] | None = None) -> str:
        """The card of the game named in ``kwargs["game"]``, then this view's."""
        return env_card_of(cls, kwargs)

    def __init__(
        self,
        game: str,
        *,
        messages: bool = False,
        max_message_chars: int = 200,
        history_rounds: int = 3,
        split: str = "train",
        invalid_limit: int = DEFAULT_INVALID_LIMIT,
        render_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(messages, bool):
            raise ConfigError(f"messages must be true or false, got {messages!r}.")
        for name, value in (("max_message_chars", max_message_chars), ("history_rounds", history_rounds)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}.")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}.")
        self._episode = _Episode(game, split, invalid_limit, kwargs)
        self.messages = messages
        self.max_message_chars = max_message_chars
        self.history_rounds = history_rounds
        self.render_mode = render_mode
        g = self._episode.game
        self.possible_agents = [f"agent_{i}" for i in range(g.n_agents)]
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._init_text_spaces(self.possible_agents)
        self._rng = np.random.default_rng()
        self._clear()

    def _clear(self) -> None:
        n = self._episode.game.n_agents
        self._turns = [0] * n
        self._last_rewards = np.zeros(n, dtype=np.float32)
        self._last_payoffs = np.zeros(n, dtype=np.float32)
        self._inbox: list[list[tuple[int, str]]] = [[] for _ in range(n)]
        self._notes: list[list[str]] = [[] for _ in range(n)]

    @property
    def game(self) -> Any:
        """The :class:`~.game.Game` being played."""
        return self._episode.game

    # ------------------------------------------------------------------ words
    def role(self, i: int) -> str:
        """Agent ``i``'s role in words (the game's ``roles``, else ``player i``)."""
        roles = self.game.roles
        if roles and i < len(roles):
            return str(roles[i])
        return f"player {i}"

    def _intro(self, i: int) -> list[str]:
        g = self.game
        mechanism = MECHANISMS.get(g.mechanism, "")
        e, base = float(g.endowments[i]), float(g.baselines[i])
        others = ", ".join(f"{self.possible_agents[j]} ({self.role(j)})" for j in range(g.n_agents) if j != i)
        value = "grows with diminishing returns" if g.value.specification == "logarithmic" else "grows as a power"
        lines = [
            f"Coopetition game {g.name} ({g.mechanism}: {mechanism}). {g.summary}.",
            f"You are {self.possible_agents[i]} ({self.role(i)}). The others: {others or 'none'}.",
            f"Every round all agents choose at the same time a {g.contribution}.",
            (
                f"Your endowment is {_fmt(e)}: you keep what you do not contribute; what you contribute creates value "
                f"for you that {value}, and you get a {_fmt(float(g.alpha[i]) * 100)}% share of a joint surplus that "
                "exists only when everyone contributes something."
            ),
        ]
        if g.trust_enabled:
            lines.append(
                f"Contributing at least {_fmt(base)} (your baseline) builds the others' trust in you; less erodes "
                "it, faster than it builds, and leaves reputation damage that caps how far trust can recover."
            )
        lines.append(f"Reward mode {g.reward_mode}: {REWARD_MODE_WORDS.get(g.reward_mode, g.reward_mode)}.")
        return lines

    def _history(self, i: int) -> list[str]:
        g = self.game
        if not g.history:
            return ["No round has been played yet."]
        first = max(0, len(g.history) - self.history_rounds)
        lines = ["Recent rounds (contributions):"]
        for r in range(first, len(g.history)):
            row = g.history[r]
            parts = [f"you {_fmt(row[i])}"] + [
                f"{self.possible_agents[j]} {_fmt(row[j])}" for j in range(g.n_agents) if j != i
            ]
            lines.append(f"  round {r + 1}: " + ", ".join(parts))
        return lines

    def _trust(self, i: int) -> list[str]:
        g = self.game
        if not g.trust_enabled:
            return ["Trust is not tracked in this game."]
        lines = ["Your trust toward the others (0 none .. 1 full) and the reputation damage you hold against them:"]
        for j in range(g.n_agents):
            if j == i:
                continue
            t, d = float(g.trust[i, j]), float(g.reputation[i, j])
            lines.append(
                f"  {self.possible_agents[j]}: trust {t:.2f} ({trust_words(t)}), "
                f"reputation damage {d:.2f} ({_damage_words(d)})"
            )
        return lines

    def _answer_format(self, i: int) -> str:
        e = _fmt(float(self.game.endowments[i]))
        text = f"Answer with your contribution, a number from 0 to {e}, e.g. <action>{_fmt(float(self.game.baselines[i]))}</action>."
        if self.messages:
            text += (
                f" You may add a short message (up to {self.max_message_chars} characters) that the others read "
                "next round: <action>40 say: your message</action>."
            )
        return text

    def _observe(self, i: int) -> str:
        g, episode = self.game, self._episode
        lines = self._intro(i)
        horizon = f"Round {g.step_count + 1} of at most {g.max_steps}."
        if episode.over:
            horizon = f"The game is over after {g.step_count} round(s) ({episode.reason})."
        lines += ["", horizon, *self._history(i), *self._trust(i)]
        if g.step_count:
            lines.append(
                f"Last round: your reward {_fmt(float(self._last_rewards[i]))}, "
                f"your payoff {_fmt(float(self._last_payoffs[i]))}."
            )
        if self.messages and self._inbox[i]:
            lines.append("Messages from the others last round:")
            lines += [f'  {self.possible_agents[j]}: "{text}"' for j, text in self._inbox[i]]
        if self._notes[i]:
            lines += ["", *self._notes[i]]
        if not episode.over:
            lines += ["", self._answer_format(i)]
        return "\n".join(lines)

    def state_text(self) -> str:
        """The whole state as text: the game's and the messages in flight."""
        return self._episode.state_text() + repr(self._inbox)

    # ------------------------------------------------------------------ API
    def sample_action(self, agent: str, rng: random.Random) -> str:
        """A random legal answer for ``agent`` (a whole-number contribution, in one of the accepted forms)."""
        i = self._index.get(agent)
        if i is None:
            raise unknown_agent(agent, self.possible_agents)
        amount = rng.randint(0, int(np.floor(float(self.game.endowments[i]))))
        text = rng.choice((f"<action>{amount}</action>", f"contribute {amount}", f"{amount}"))
        if self.messages and rng.random() < 0.5:
            text = text.replace("</action>", "") + f" say: {rng.choice(_SAMPLE_MESSAGES)}"
        return text

    def _infos(self, valid: Mapping[int, bool], problems: Mapping[int, str], sent: Mapping[int, str]) -> dict[str, Any]:
        episode = self._episode
        task = {**episode.task(), "view": "text"}
        numbers = episode.numbers()
        rewards, payoffs = self._round_rewards, self._round_payoffs
        infos = {}
        for agent, i in self._index.items():
            infos[agent] = agent_info(
                task,
                admissible_actions=None,
                action_valid=valid.get(i, True),
                reward_components={"payoff_reward": float(payoffs[i]), "social_reward": float(rewards[i] - payoffs[i])},
                success=episode.reason == TerminationReason.SUCCESS.value,
                termination_reason=episode.reason,
                turn=self._turns[i],
                invalid_actions=episode.invalid[i],
                reward_basis=list(COMPONENTS),
                round=self.game.step_count,
                rewards=[float(r) for r in rewards],
                payoffs=[float(p) for p in payoffs],
                agent=agent,
                own_action=float(self.game.actions[i]),
                **numbers,
            )
            if i in sent:
                infos[agent]["message_sent"] = sent[i]
            if problems:
                infos[agent]["invalid_reason"] = {self.possible_agents[j]: why for j, why in problems.items()}
        return infos

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._episode.reset(seed if seed is not None else int(self._rng.integers(2**31)))
        self._clear()
        self.agents = list(self.possible_agents)
        n = self.game.n_agents
        self._round_rewards = self._round_payoffs = np.zeros(n, dtype=np.float32)
        observations = {a: TextObservation(self._observe(i)) for a, i in self._index.items()}
        return observations, self._infos({}, {}, {})

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[dict[str, str], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        episode = self._episode
        episode.require_live(self)
        if not self.agents:
            raise ResetNeededError(f"{self}: the episode is over ({episode.reason}); call reset().")
        if not isinstance(actions, Mapping):
            raise ConfigError(f"step() takes a dict {{agent: action text}}, got {type(actions).__name__}.")
        for agent in actions:
            if agent not in self._index:
                raise unknown_agent(agent, self.possible_agents)
        n = self.game.n_agents
        contributions = np.zeros(n, dtype=np.float32)
        problems: dict[int, str] = {}
        said: dict[int, str] = {}
        notes: list[list[str]] = [[] for _ in range(n)]
        for agent, i in self._index.items():
            self._turns[i] += 1
            if agent not in actions:
                problems[i] = "no answer"
                continue
            try:
                value, message = parse_answer(actions[agent], float(self.game.endowments[i]))
            except InvalidAction as err:
                problems[i] = str(err)
                continue
            contributions[i] = value
            if message:
                if not self.messages:
                    notes[i].append("(Messages are off in this game: your message was not delivered.)")
                elif len(message) > self.max_message_chars:
                    message = message[: self.max_message_chars]
                    notes[i].append(f"(Your message was cut to {self.max_message_chars} characters.)")
                if self.messages and message:
                    said[i] = message
        zeros = np.zeros(n, dtype=np.float32)
        if problems:
            episode.invalid_round(problems)
            self._round_rewards = self._round_payoffs = zeros
            terminated, truncated = episode.over, False
            for i in range(n):
                if i in problems:
                    shown = shown_action(actions.get(self.possible_agents[i]))
                    notes[i] = [
                        f"Your last answer {shown!r} was invalid: {problems[i]} The round was not played; answer again."
                    ]
                else:
                    who = ", ".join(self.possible_agents[j] for j in sorted(problems))
                    notes[i] = [f"The round was not played: the answer of {who} was invalid. Answer again."]
            sent: dict[int, str] = {}
        else:
            result = episode.play(contributions)
            self._round_rewards, self._round_payoffs = result.rewards, result.payoffs
            self._last_rewards, self._last_payoffs = result.rewards.copy(), result.payoffs.copy()
            terminated = result.terminated
            truncated = result.truncated and not terminated
            self._inbox = [[(j, text) for j, text in sorted(said.items()) if j != i] for i in range(n)]
            sent = said
        self._notes = notes
        valid = {i: i not in problems for i in range(n)}
        infos = self._infos(valid, problems, sent)
        live = list(self.agents)
        rewards = self._round_rewards
        out = (
            {a: TextObservation(self._observe(self._index[a])) for a in live},
            {a: float(rewards[self._index[a]]) for a in live},
            dict.fromkeys(live, bool(terminated)),
            dict.fromkeys(live, bool(truncated)),
            {a: infos[a] for a in live},
        )
        if terminated or truncated:
            self.agents = []
        return out

    def render(self) -> str | None:
        return self._episode.render() if self.render_mode == "ansi" else None

    def close(self) -> None:
        pass
