"""The household text environment (ALFWorld-style, generated rather than downloaded)."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any, ClassVar

from envgym.environments.household.catalogue import ROOMS, TASK_ALIASES, TASK_TYPES, resolve_task_type
from envgym.environments.household.generator import DIFFICULTIES, generate
from envgym.environments.household.goals import Goal
from envgym.environments.household.planner import optimal_plan
from envgym.environments.household.simulator import World, is_mutating

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError, check_choice, suggest

__all__ = ["HouseholdEnv"]

NOTHING_HAPPENS = "Nothing happens."
#: The last line of the start text: the command format (the agent may not see admissible_actions).
COMMANDS_HINT = (
    "Type one command per turn, such as 'go to RECEPTACLE', 'open RECEPTACLE', 'take OBJECT from RECEPTACLE' "
    "or 'move OBJECT to RECEPTACLE', using the names with their numbers; 'help' lists every command."
)

_PUT = re.compile(r"^put (.+?) (?:in/on|in|on|into|onto|inside) (.+)$")
_MOVE_INTO = re.compile(r"^move (.+?) (?:into|in|on|onto) (.+)$")
_SHORTCUTS = {"i": "inventory", "inv": "inventory", "l": "look", "h": "help", "?": "help", "commands": "help"}


def canonical_command(text: str) -> str:
    """Lower-case ``text`` and rewrite the accepted aliases to the canonical ALFWorld command.

    ``put X in Y``, ``put X on Y``, ``put X in/on Y`` (ALFWorld before 0.4) and ``move X into Y``
    become ``move X to Y``; ``the`` before a name is dropped (``go to the fridge 1``); a final
    period is ignored; ``i``/``l``/``h``/``?`` are inventory, look and help.
    """
    t = text.lower().strip().rstrip(".!").strip()
    if t in _SHORTCUTS:
        return _SHORTCUTS[t]
    if "the " in t:
        t = re.sub(r"(?:(?<=\s)|^)the\s+", "", t)
    if t.startswith("put "):
        m = _PUT.match(t)
        if m:
            return f"move {m[1]} to {m[2]}"
    elif t.startswith("move ") and " to " not in t:
        m = _MOVE_INTO.match(t)
        if m:
            return f"move {m[1]} to {m[2]}"
    elif t.startswith("goto "):
        return "go to " + t[5:]
    elif t.startswith("x "):
        return "examine " + t[2:]
    return t


def _int_range(name: str, value: Any, high: int) -> tuple[int, int]:
    """An env argument given as an int or a ``(min, max)`` pair, as a pair within ``[0, high]``."""
    pair = (value, value) if isinstance(value, int) else value
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
        or not 0 <= pair[0] <= pair[1] <= high
    ):
        raise InvalidKwargsError(
            f"{name} must be an int or a (min, max) pair with 0 <= min <= max <= {high}, got {value!r}."
        )
    return int(pair[0]), int(pair[1])


class HouseholdEnv(TextEnv):
    """Household text worlds with the six ALFWorld task types, generated from a seed.

    **Description.** A house of one or more rooms (kitchen, living room, bedroom, bathroom,
    office, dining room) with numbered receptacles (``cabinet 3``, ``countertop 1``; openable
    ones may be closed) and objects with affordances (cleanable, heatable, coolable, sliceable,
    light sources). The goal is one of ALFWorld's six task types, written with ALFWorld's goal
    templates: ``pick_and_place_simple`` ("put a mug in cabinet"), ``look_at_obj_in_light``
    ("look at book under the desklamp"), ``pick_clean_then_place_in_recep`` ("put a clean mug
    in coffeemachine"), ``pick_heat_then_place_in_recep``, ``pick_cool_then_place_in_recep``
    and ``pick_two_obj_and_place`` ("put two pen in drawer"). Success is read from the world
    state, never from text. Tasks are unlimited and need no download.

    **Rooms.** As in ALFWorld, ``go to X`` reaches any receptacle of the house in one step,
    whatever room it is in; the room changes with it ("You walk into the kitchen. You arrive
    at ..."). The start text describes the room the agent stands in and lists the receptacles
    of every other room.

    **Observation.** At reset: a banner, the room description ("You are in the middle of the
    kitchen. Looking quickly around you, you see a cabinet 1, ...", then the other rooms), one
    line on the command format and "Your task is to: <goal>." After a valid command: ALFWorld's feedback ("You arrive at
    countertop 1. On the countertop 1, you see a mug 1.", "You open the fridge 1. The fridge 1
    is open. In it, you see an apple 1.", "You heat the mug 1 using the microwave 1."). Articles
    follow English ("an apple 1") where ALFWorld writes "a apple 1".

    **Actions.** ALFWorld's grammar: ``go to X``, ``open X``, ``close X``, ``take O from X``,
    ``move O to X`` (``put O in/on X``, ``put O in X`` and ``put O on X`` are accepted too),
    ``use LAMP``, ``heat O with microwave N``, ``cool O with fridge N``, ``clean O with
    sinkbasin N`` (or a bathtubbasin), ``slice O with KNIFE``, ``examine O|X``, ``inventory``,
    ``look`` and ``help``. ``info["admissible_actions"]`` lists every valid command in canonical
    form; ``help`` is one of them (a free no-op apart from the turn it takes). Any other text
    answers "Nothing happens." and is an invalid step. One object is carried at a time.

    **Reward components.**

    * ``success_reward``: +1 on the step that reaches the goal.
    * ``progress_reward``: the change of :meth:`progress` (sub-goal progress in [0, 1], see
      :meth:`envgym.environments.household.goals.Goal.progress`) on each step, so the sum over
      an episode is the final progress. With the default rubric (the plain sum) a success is
      worth 2.0; pass ``reward={"progress_reward": 0}`` for ALFWorld's sparse reward, or keep
      ``info["progress"]`` for potential-based shaping in a reward layer.
    * ``invalid_action_reward``: ``invalid_penalty`` (default -0.1) on an invalid step.
    * ``step_cost_reward``: ``step_cost`` (default 0) on every step.

    **Reward basis.** The reward is the sum of every component (``success_reward``, ``progress_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** Terminated on success; truncated after ``max_turns`` (default 50, as in
    ALFWorld's configs); terminated by ``invalid_limit`` when set. No failure state exists.

    **Arguments.**

    * ``difficulty``: ``"easy"`` (1 room, 5-10 receptacles, 2-4 distractors, half the
      containers closed), ``"medium"`` (2 rooms, 10-20 receptacles, 5-8 distractors, 80 % of
      the containers closed) or ``"hard"`` (3 rooms, 16-38 receptacles, 9-14 distractors, every
      container closed); medium and hard may hide a second object of the goal type. Default
      ``"medium"``.
    * ``task_type``: an ALFWorld type name, a short name (``pick_place``, ``look``, ``clean``,
      ``heat``, ``cool``, ``pick_two``), its number 1-6, or ``None``/``"any"`` (drawn per seed).
    * ``rooms``, ``distractors`` (an int or a ``(min, max)`` pair), ``closed_fraction``: override
      the preset.
    * ``start_steps``: start each episode this many steps along the privileged shortest plan
      (:meth:`optimal_plan`), an int or a ``(min, max)`` pair drawn per episode, never the plan's
      last step: a reverse curriculum for RL training (Salimans & Chen, 2018), whose episodes
      start near the goal as often as at its far end. The start observation is the last step's
      feedback and the agent's status; ``info["task"]["start_steps"]`` lists the commands played.
      Default 0 (evaluation always starts at the beginning).
    * ``split``: ``"train"``, ``"valid_seen"`` (train's floor plans and goal pairs, other
      seeds) or ``"valid_unseen"`` (floor plans and (object, receptacle) goal pairs that never
      occur in train).
    * Common ``TextEnv`` arguments: ``max_turns``, ``invalid_limit``, ``invalid_penalty``,
      ``step_cost``, ``reward``, ``render_mode``.

    ``reset(options={"world": world, "goal": goal})`` plays a hand-built
    :class:`~envgym.environments.household.simulator.World` and
    :class:`~envgym.environments.household.goals.Goal` instead of a generated one.

    **Version history.** v0: first release.
    """

    name: ClassVar[str] = "household"
    reward_components: ClassVar[tuple[str, ...]] = (
        "success_reward",
        "progress_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis: ClassVar[tuple[str, ...]] = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 50
    splits: ClassVar[tuple[str, ...]] = ("train", "valid_seen", "valid_unseen")

    def __init__(
        self,
        *,
        difficulty: str = "medium",
        task_type: str | int | None = None,
        rooms: int | None = None,
        distractors: int | tuple[int, int] | None = None,
        closed_fraction: float | None = None,
        start_steps: int | tuple[int, int] = 0,
        max_turns: int | None = None,
        invalid_limit: int | None = None,
        invalid_penalty: float = -0.1,
        step_cost: float = 0.0,
        reward: Any = None,
        split: str = "train",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            invalid_limit=invalid_limit,
            invalid_penalty=invalid_penalty,
            step_cost=step_cost,
            reward=reward,
            split=split,
            render_mode=render_mode,
        )
        check_choice("difficulty", difficulty, DIFFICULTIES)
        try:
            self.task_type = resolve_task_type(task_type)
        except KeyError:
            names = sorted({*TASK_TYPES, *(k for k in TASK_ALIASES if not k.isdigit())})
            raise InvalidKwargsError(
                f"task_type must be None, 'any', 1-6 or one of {', '.join(map(repr, names))}; got {task_type!r}."
                f"{suggest(str(task_type), names)}"
            ) from None
        preset = DIFFICULTIES[difficulty]
        if rooms is not None:
            if not isinstance(rooms, int) or isinstance(rooms, bool) or not 1 <= rooms <= len(ROOMS):
                raise InvalidKwargsError(f"rooms must be an integer from 1 to {len(ROOMS)}, got {rooms!r}.")
            preset = dataclasses.replace(preset, rooms=rooms)
        if distractors is not None:
            preset = dataclasses.replace(preset, distractors=_int_range("distractors", distractors, 60))
        if closed_fraction is not None:
            if not isinstance(closed_fraction, (int, float)) or not 0.0 <= closed_fraction <= 1.0:
                raise InvalidKwargsError(f"closed_fraction must be a number in [0, 1], got {closed_fraction!r}.")
            preset = dataclasses.replace(preset, closed_fraction=float(closed_fraction))
        self.start_steps = _int_range("start_steps", start_steps, 100)
        self.difficulty = difficulty
        self.settings = preset
        self._start_feedback = ""  # the last feedback of the steps played at reset (start_steps)
        self._rest_of_plan: list[str] | None = None
        self.world: World | None = None
        self.goal: Goal | None = None
        self._adm: list[str] | None = None
        self._local: dict[str, tuple[str, ...]] = {}
        self._progress = 0.0

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        if options and "world" in options:
            world, goal = options["world"], options.get("goal")
            if not isinstance(world, World) or not isinstance(goal, Goal):
                raise InvalidKwargsError(
                    "reset options 'world' and 'goal' must be a household World and Goal, got "
                    f"{type(world).__name__} and {type(goal).__name__}."
                )
            if goal.success(world):
                raise InvalidKwargsError(f"the goal {goal.text!r} already holds in the given world: nothing to do.")
            world = world.clone()
            custom = True
        else:
            unseen = self.split == "valid_unseen"
            world, goal = generate(rng, task_type=self.task_type, difficulty=self.settings, unseen=unseen)
            custom = False
        self.world, self.goal = world, goal
        self._adm = None
        fingerprint = world.fingerprint(goal.text)
        played = self._play_start(rng, world, goal)
        self._progress = goal.progress(world)
        label = "custom" if custom else self.difficulty
        start = f"/start{len(played)}" if played else ""
        return Task(
            id=f"household/{self.split}/{label}/{goal.task_type}/{fingerprint:08x}{start}",
            goal=goal.text,
            split=self.split,
            difficulty=label,
            extra={
                "task_type": goal.task_type,
                "object": goal.obj,
                "target": goal.target,
                "rooms": list(world.rooms),
                "floorplans": list(world.floorplans),
                "receptacles": len(world.recs),
                "start_steps": played,
            },
        )

    def _play_start(self, rng: random.Random, world: World, goal: Goal) -> list[str]:
        """Play the first ``start_steps`` steps of the shortest plan (drawn after the world, so the
        world is the one the same seed gives without them); return the commands played."""
        self._start_feedback = ""
        self._rest_of_plan = None
        low, high = self.start_steps
        if high == 0:
            return []
        plan = optimal_plan(world, goal)
        played = plan[: min(rng.randint(low, high), len(plan) - 1)]
        for command in played:
            self._start_feedback = world.execute(self._parse(command))
            self._adm = None
        self._rest_of_plan = plan[len(played) :]
        return played

    def _intro(self) -> str:
        assert self.world is not None
        if self._start_feedback:  # started part-way along the plan: what the last step said
            return self._start_feedback
        return f"-= Welcome to envgym Household! =-\n\n{self.world.overview()}\n{COMMANDS_HINT}"

    def _observe(self) -> str:
        assert self.world is not None and self.goal is not None
        status = self.world.status()
        task = f"Your task is to: {self.goal.text}."
        return f"{status}\n{task}" if status else task

    def _refresh(self) -> list[str]:
        world = self.world
        assert world is not None
        self._local = world.local_commands()
        loc = world.loc
        gos = list(world.go_commands())
        if loc >= 0:
            del gos[loc]
        gos.extend(self._local)
        self._adm = gos
        return gos

    def _parse(self, text: str) -> tuple[str, ...]:
        if self._adm is None:
            self._refresh()
        world = self.world
        assert world is not None
        cmd = self._local.get(text)
        if cmd is not None:
            return cmd
        target = world.go_commands().get(text)
        if target is not None and target != world.loc:
            return ("go", str(target))
        canon = canonical_command(text)
        cmd = self._local.get(canon)
        if cmd is not None:
            return cmd
        target = world.go_commands().get(canon)
        if target is not None and target != world.loc:
            return ("go", str(target))
        raise InvalidAction(NOTHING_HAPPENS)

    def _apply(self, action: tuple[str, ...]) -> Transition:
        world, goal = self.world, self.goal
        assert world is not None and goal is not None
        feedback = world.execute(action)
        if not is_mutating(action):
            return Transition(feedback, {})
        self._adm = None
        before = self._progress
        now = goal.progress(world)
        self._progress = now
        rewards = {"progress_reward": now - before} if now != before else {}
        if now >= 1.0:
            rewards["success_reward"] = 1.0
            return Transition(f"{feedback}\n\nYou completed the task!", rewards, terminated=True, success=True)
        return Transition(feedback, rewards)

    def admissible_actions(self) -> list[str]:
        adm = self._adm if self._adm is not None else self._refresh()
        return list(adm)

    def progress(self) -> float:
        return self._progress

    def optimal_plan(self) -> list[str]:
        """Privileged shortest plan from a fresh reset (for reports and tests, not agents); after
        ``start_steps``, the rest of the plan those steps came from."""
        assert self.world is not None and self.goal is not None
        if self._rest_of_plan is not None and self.turn == 0:
            return list(self._rest_of_plan)
        return optimal_plan(self.world, self.goal)
