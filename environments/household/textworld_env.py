"""TextWorld bridge: games generated per seed with the ``textworld`` package, compiled offline.

``textworld`` is optional (``pip install 'envgym[textworld]'``). It is imported when the
environment is built, never when the family is registered, so ``envgym list`` works without it.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, ClassVar

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import EnvgymError, InvalidKwargsError, MissingDependencyError

__all__ = ["TextWorldEnv", "default_cache_dir"]

_BANNER_CHARS = frozenset(" _|\\$/><")
_INFO_SLOTS = ("admissible_commands", "objective", "won", "lost", "score", "max_score", "description", "inventory")


def default_cache_dir() -> Path:
    """``$ENVGYM_CACHE_DIR/textworld``, else ``$XDG_CACHE_HOME/envgym/textworld`` (``~/.cache``)."""
    root = os.environ.get("ENVGYM_CACHE_DIR")
    if root:
        return Path(root) / "textworld"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "envgym" / "textworld"


def _import_textworld() -> Any:
    try:
        import textworld
        import textworld.generator
    except ImportError as err:
        raise MissingDependencyError("textworld", "textworld", "envgym/TextWorld-v0") from err
    return textworld


def _clean(text: str) -> str:
    """Drop TextWorld's ASCII-art banner, the replay prompt and surrounding blank lines."""
    lines = text.replace("\r", "").split("\n")
    while lines and set(lines[0]) <= _BANNER_CHARS:
        lines.pop(0)
    out = "\n".join(lines)
    cut = out.find("Would you like to RESTART")
    if cut >= 0:
        out = out[:cut]
    return out.strip().rstrip(">").strip()


@contextlib.contextmanager
def _quiet() -> Any:
    # Jericho warns that TextWorld's games are "unsupported" (it has no hand-written action
    # templates for them) every turn; TextWorld computes the admissible commands itself.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Unable to find valid actions")
        yield


class TextWorldEnv(TextEnv):
    """TextWorld games, one generated per seed and compiled to a Z-machine file on disk.

    **Description.** A bridge to Microsoft's TextWorld: each ``reset(seed=...)`` generates a
    game (map, objects and a quest) with ``textworld.generator.make_game`` from seeds derived
    from the episode seed, compiles it with the Inform 7 toolchain that ships in the
    ``textworld`` wheel (offline), caches the compiled game on disk and plays it through
    TextWorld's own engine. The same seed always gives the same game.

    **Observation.** At reset: the quest objective, the room description and the inventory.
    After a command: TextWorld's feedback, without its ASCII banner and replay prompt.

    **Actions.** TextWorld's commands (``go north``, ``open wooden door``, ``take key from
    table``, ``put key on shelf``, ``eat apple``, ``look``, ``inventory``, ...).
    ``info["admissible_actions"]`` lists TextWorld's admissible commands; anything else answers
    "Nothing happens." and is an invalid step (it is not sent to the game, so the state is
    unchanged).

    **Reward components.** ``success_reward`` +1 when the quest is won; ``progress_reward`` the
    change of score / max score (TextWorld's intermediate rewards, sum = final progress);
    ``invalid_action_reward`` and ``step_cost_reward`` as in every envgym env.

    **Reward basis.** The reward is the sum of every component (``success_reward``, ``progress_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** Terminated when the quest is won (success) or lost (failure); truncated
    after ``max_turns`` (default 50).

    **Arguments.** ``rooms`` (default 3), ``objects`` (default 6), ``quest_length`` (default 3),
    ``cache_dir`` (default :func:`default_cache_dir`), ``split`` (``train`` games use even map
    seeds and ``test`` games odd ones, so the two never share a game), and the common
    ``TextEnv`` arguments.

    **Version history.** v0: first release (textworld 1.6+).
    """

    name: ClassVar[str] = "textworld"
    # The game runs in TextWorld's engine (a live interpreter), which cannot be pickled.
    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "picklable": False}
    reward_components: ClassVar[tuple[str, ...]] = (
        "success_reward",
        "progress_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis: ClassVar[tuple[str, ...]] = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 50

    def __init__(
        self,
        *,
        rooms: int = 3,
        objects: int = 6,
        quest_length: int = 3,
        cache_dir: str | os.PathLike[str] | None = None,
        max_turns: int | None = None,
        invalid_limit: int | None = None,
        invalid_penalty: float = -0.1,
        step_cost: float = 0.0,
        reward: Any = None,
        split: str = "train",
        render_mode: str | None = None,
    ) -> None:
        for label, value, top in (("rooms", rooms, 20), ("objects", objects, 40), ("quest_length", quest_length, 20)):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
                raise InvalidKwargsError(f"{label} must be an integer from 1 to {top}, got {value!r}.")
        super().__init__(
            max_turns=max_turns,
            invalid_limit=invalid_limit,
            invalid_penalty=invalid_penalty,
            step_cost=step_cost,
            reward=reward,
            split=split,
            render_mode=render_mode,
        )
        self._tw = _import_textworld()
        self.rooms = rooms
        self.objects = objects
        self.quest_length = quest_length
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._game: Any = None  # the running textworld Environment
        self._state: Any = None  # the latest textworld GameState
        self._actions: list[str] = []
        self._score = 0.0
        self._max_score = 1.0
        self.game_file: Path | None = None

    # ------------------------------------------------------------------ game files
    def _options(self, rng: random.Random) -> Any:
        options = self._tw.GameOptions()
        parity = 0 if self.split == "train" else 1
        options.seeds = {
            "map": rng.getrandbits(30) * 2 + parity,
            "objects": rng.getrandbits(31),
            "quest": rng.getrandbits(31),
            "grammar": rng.getrandbits(31),
        }
        options.nb_rooms = self.rooms
        options.nb_objects = self.objects
        options.quest_length = self.quest_length
        return options

    def _compiled(self, rng: random.Random) -> Path:
        """The compiled game for this episode: from the cache, or generated and compiled now."""
        last_error: Exception | None = None
        for _ in range(8):  # some seeds admit no quest of the requested length: draw others
            options = self._options(rng)
            uuid = options.uuid
            target = self.cache_dir / f"{uuid}.z8"
            if target.is_file() and target.with_suffix(".json").is_file():
                return target
            try:
                self._build(options, target)
            except Exception as err:
                if type(err).__name__ in ("QuestGenerationError", "GenerationWarning", "NoSuchQuestExistError"):
                    last_error = err
                    continue
                raise EnvgymError(f"TextWorld could not generate or compile game {uuid!r}: {err!r}") from err
            return target
        raise EnvgymError(
            f"TextWorld found no quest of length {self.quest_length} with {self.rooms} rooms and "
            f"{self.objects} objects after 8 draws ({last_error!r}); lower quest_length or add objects."
        )

    def _build(self, options: Any, target: Path) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=".tw-", dir=self.cache_dir))
        try:
            options.path = str(workdir / target.name)
            with contextlib.redirect_stdout(io.StringIO()):
                game = self._tw.generator.make_game(options)
                built = Path(self._tw.generator.compile_game(game, options))
            # Publish atomically, metadata first: a reader that sees the .z8 also finds the .json.
            os.replace(built.with_suffix(".json"), target.with_suffix(".json"))
            os.replace(built, target)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        path = self._compiled(rng)
        if self._game is not None:
            self._game.close()
        infos = self._tw.EnvInfos(**dict.fromkeys(_INFO_SLOTS, True))
        with _quiet():
            self._game = self._tw.start(str(path), request_infos=infos)
            self._state = self._game.reset()
        self.game_file = path
        self._score = float(self._state.score or 0)
        self._max_score = float(self._state.max_score or 1) or 1.0
        self._actions = list(self._state.admissible_commands or [])
        objective = _clean(str(self._state.objective or ""))
        return Task(
            id=f"textworld/{self.split}/{path.stem}",
            goal=objective,
            split=self.split,
            difficulty=f"rooms={self.rooms},objects={self.objects},quest_length={self.quest_length}",
            extra={"game": path.stem, "max_score": self._max_score},
        )

    def _intro(self) -> str:
        return f"-= Welcome to TextWorld! =-\n\n{self.task.goal}"

    def _observe(self) -> str:
        if self._state is None:
            return ""
        description = _clean(str(self._state.description or ""))
        inventory = _clean(str(self._state.inventory or ""))
        return f"{description}\n\n{inventory}".strip()

    def _parse(self, text: str) -> str:
        command = text.strip().lower().rstrip(".")
        if command not in self._actions:
            raise InvalidAction("Nothing happens.")
        return command

    def _apply(self, command: str) -> Transition:
        with _quiet():
            state, _, done = self._game.step(command)
        self._state = state
        self._actions = list(state.admissible_commands or [])
        score = float(state.score or 0)
        rewards: dict[str, float] = {}
        if score != self._score:
            rewards["progress_reward"] = (score - self._score) / self._max_score
            self._score = score
        feedback = _clean(str(state.feedback or ""))
        if state.won:
            rewards["success_reward"] = 1.0
            return Transition(feedback, rewards, terminated=True, success=True)
        if state.lost or done:
            return Transition(feedback, rewards, terminated=True, success=False)
        return Transition(feedback, rewards)

    def admissible_actions(self) -> list[str]:
        return list(self._actions)

    def progress(self) -> float:
        return max(0.0, min(1.0, self._score / self._max_score))

    def close(self) -> None:
        super().close()
        if self._game is not None:
            self._game.close()
            self._game = None
