"""envgym/GUIGrounding-*: point at (or box) the element an instruction names on a rendered page."""

from __future__ import annotations

import hashlib
import math
import random
import re
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from envgym.environments.gui.grounding.forms import (
    TARGET_ROLES,
    TEMPLATES,
    Element,
    describe_target,
    generate_form,
    name_element,
)
from envgym.environments.gui.grounding.miniwob import MiniWoBScenes, pages
from envgym.environments.gui.grounding.render import BrowserPage, check_browser

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError, check_choice
from envgym.spaces import MAX_TEXT_LENGTH, Text

__all__ = ["ANSWERS", "OBSERVATIONS", "SOURCES", "GUIGroundingEnv", "parse_answer", "score_answer"]

SOURCES = ("forms", "miniwob")
#: Screenshot pixels per CSS pixel of the MiniWoB scenes (their task area is 160 x 210 CSS pixels).
MINIWOB_SCALE = 2
OBSERVATIONS = ("dict", "text")
ANSWERS = ("any", "point", "box")

Box = tuple[float, float, float, float]

_NUM = r"([-+]?\d+(?:\.\d+)?)"
_CLICK = re.compile(rf"^(?:click|click_xy)\s*\(\s*{_NUM}\s*,\s*{_NUM}\s*\)$", re.IGNORECASE)
_BOX = re.compile(rf"^box\s*\(\s*{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*\)$", re.IGNORECASE)
#: Smallest side, in pixels, of an element that may be a target (and is listed).
_MIN_SIDE = 4
#: Recent renders kept per env (a few hundred KB each).
_RENDER_CACHE = 4


def parse_answer(text: str, width: int, height: int) -> tuple[str, tuple[float, ...]]:
    """``("point", (x, y))`` or ``("box", (x1, y1, x2, y2))`` from an answer, or InvalidAction.

    Coordinates are screenshot pixels from the top-left corner, inside ``[0, width] x [0,
    height]``; a box needs ``x1 < x2`` and ``y1 < y2``.
    """
    match = _CLICK.match(text)
    kind = "point"
    if match is None:
        match = _BOX.match(text)
        kind = "box"
    if match is None:
        raise InvalidAction(
            f"expected click(x, y) or box(x1, y1, x2, y2) in screenshot pixels, e.g. click({width // 2}, "
            f"{height // 2})."
        )
    values = tuple(float(v) for v in match.groups())
    xs, ys = values[0::2], values[1::2]
    if not all(0 <= x <= width for x in xs) or not all(0 <= y <= height for y in ys):
        raise InvalidAction(f"coordinates must lie on the {width}x{height} screen (x in 0..{width}, y in 0..{height}).")
    if kind == "box" and not (values[0] < values[2] and values[1] < values[3]):
        raise InvalidAction("a box needs x1 < x2 and y1 < y2 (top-left corner first, then bottom-right).")
    return kind, values


def _inside(x: float, y: float, box: Box) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def _iou(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union


def score_answer(kind: str, values: tuple[float, ...], target: Box, width: int, height: int) -> dict[str, float]:
    """The reward components of an answer against the ``target`` box.

    ``hit_reward`` 1 when the point (a box: its centre) is inside the target box (edges
    included); ``distance_reward`` minus the distance from that point to the target's centre over
    the screen diagonal (0 at the centre, at worst -1); ``iou_reward`` the box's intersection
    over union with the target (0 for a point).
    """
    if kind == "point":
        x, y = values
        iou = 0.0
    else:
        x, y = (values[0] + values[2]) / 2, (values[1] + values[3]) / 2
        iou = _iou(values, target)  # type: ignore[arg-type]
    cx, cy = (target[0] + target[2]) / 2, (target[1] + target[3]) / 2
    distance = math.hypot(x - cx, y - cy) / math.hypot(width, height)
    return {"hit_reward": 1.0 if _inside(x, y, target) else 0.0, "distance_reward": -distance, "iou_reward": iou}


class GUIGroundingEnv(TextEnv):
    """GUI grounding: a screenshot and an instruction; answer with the point (or box) of the element it names.

    **Description.** GUI-R1 / UI-S1 style grounding in a real browser. Each episode a web form
    is generated from the seed (a heading, labelled text fields, a drop-down, check boxes, a radio
    group, a table whose rows repeat the same buttons, links and action buttons; three layouts,
    six colour schemes, four fonts, several sizes), rendered by Debian's Chromium (Playwright; one
    browser per worker thread) at the env's screen size, and one visible element is named by the
    instruction: by its text ("Click the 'Save' button."), by its label ("Click the text field
    labelled 'City'."), by its rank among equal buttons ("Click the second 'Edit' button from the
    top.") or by its row ("Click the 'Remove' button in the row for 'Umbrella'."). The element
    boxes are the ones Chromium laid out, so the target is exactly what the screenshot shows.
    ``source="miniwob"`` (``GUIGrounding-MiniWoB-v0``): the scene is instead a MiniWoB++ task page
    (24 pages with named controls: click-button, login-user, email-inbox, social-media, ...) at
    the start of a seeded episode, opened through ``envgym/MiniWoB-<task>-v0`` at scale 2 (a 320 x
    420 screenshot); the target is a button, link, tab, text field, drop-down, check box or radio
    whose role and name are unique on the page, named by its text or label.

    **Observation.** ``obs="dict"`` (default of ``GUIGrounding-v0``):
    ``Dict(instruction=Text, screenshot=Box(0, 255, (height, width, 3), uint8))``; the
    instruction text also gives the screen size and the answer format, and after a step it starts
    with the verdict. ``obs="text"`` (``GUIGrounding-Text-v0``, for text-only LLMs): one string,
    the instruction followed by the page's element list, one line per element in reading order,
    ``[id] role "name" box=(x1, y1, x2, y2)`` (roles ``heading``, ``text``, ``textbox``,
    ``combobox``, ``checkbox``, ``radio``, ``button``, ``link``). Either way ``info["elements"]``
    holds that list as dicts (``id``, ``role``, ``name``, ``box``); a benchmark of vision agents
    gives its agent the observation only. ``render_mode="rgb_array"``: ``render()`` returns the
    screenshot (``envgym run --out`` then records it as a PNG file per turn).

    **Actions.** ``click(x, y)`` (``click_xy(x, y)`` too) or ``box(x1, y1, x2, y2)``, in
    screenshot pixels from the top-left corner, numbers with or without decimals, inside the
    screen; a box needs ``x1 < x2`` and ``y1 < y2``. ``answer="point"`` or ``"box"`` accepts only
    that form. Anything else is an invalid step with feedback (the episode goes on).

    **Reward components.** ``hit_reward`` 1 when the point, or the box's centre, is inside the
    target element's box (edges included); ``distance_reward`` minus the distance from that
    point to the target's centre divided by the screen diagonal (0 to -1); ``iou_reward`` the
    box's intersection over union with the target's box (0 for a point);
    ``invalid_action_reward`` (``invalid_penalty``, default -0.1); ``step_cost_reward``. The
    scalar reward is their sum (reweight with ``reward={...}``): a click at the centre scores 1,
    a tight box up to 2.

    **Reward basis.** The reward is the sum of every component (``hit_reward``, ``distance_reward``, ``iou_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** The first valid answer terminates the episode, a success when it hits.
    ``max_turns`` (default 3) truncates a run of invalid answers.

    **Splits.** ``train`` and ``test`` draw every word of a form (titles, labels, button, link and
    row texts) from disjoint parts of the vocabularies: no test target's name occurs in a train
    form. MiniWoB scenes: every fourth page is a test page (6 test, 18 train pages).

    **Arguments.** ``obs`` (``"dict"`` or ``"text"``), ``answer`` (``"any"``, ``"point"``,
    ``"box"``), ``width`` and ``height`` of the forms' screen (default 480 x 360; at least 320 x
    240), ``source`` (``"forms"`` or ``"miniwob"``), the common ``TextEnv`` arguments; ``render_mode`` ``"rgb_array"``,
    ``"ansi"`` or ``"human"``.

    **Version history.** v0: first release.
    """

    name: ClassVar[str] = "gui_grounding"
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}
    reward_components: ClassVar[tuple[str, ...]] = (
        "hit_reward",
        "distance_reward",
        "iou_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis: ClassVar[tuple[str, ...]] = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 3

    def __init__(
        self,
        *,
        source: str = "forms",
        obs: str = "dict",
        answer: str = "any",
        width: int = 480,
        height: int = 360,
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
        self.source = check_choice("source", source, SOURCES)
        self.obs = check_choice("obs", obs, OBSERVATIONS)
        self.answer = check_choice("answer", answer, ANSWERS)
        for label, value, low, high in (("width", width, 320, 1920), ("height", height, 240, 1200)):
            if type(value) is not int or not low <= value <= high:
                raise InvalidKwargsError(f"{label} must be an integer from {low} to {high} pixels, got {value!r}.")
        if self.source == "miniwob":  # the MiniWoB task area, 160 x 210 CSS pixels, at MINIWOB_SCALE
            width, height = 160 * MINIWOB_SCALE, 210 * MINIWOB_SCALE
        self.width, self.height = width, height
        check_browser(f"envgym/GUIGrounding ({type(self).__name__})")
        if self.obs == "dict":
            self.observation_space = gym.spaces.Dict(
                {
                    "instruction": Text(MAX_TEXT_LENGTH),
                    "screenshot": gym.spaces.Box(0, 255, (height, width, 3), np.uint8),
                }
            )
        self._page: Any = None
        self._renders: dict[str, Any] = {}
        self._scenes: MiniWoBScenes | None = None
        self._shot = np.zeros((height, width, 3), np.uint8)
        self._elements: list[dict[str, Any]] = []
        self._target: Box = (0.0, 0.0, 0.0, 0.0)
        self._instruction = ""

    # ------------------------------------------------------------------ rendering
    def _render_page(self, page_html: str) -> tuple[np.ndarray, dict[str, tuple[int, int, int, int]]]:
        # The same page renders to the same pixels: a reset that replays a recent seed (evaluation
        # retries, the checker's fuzzing) reuses the render instead of asking the browser again.
        key = hashlib.sha256(page_html.encode()).hexdigest()
        cached = self._renders.pop(key, None)
        if cached is None:
            if self._page is None:
                self._page = BrowserPage(self.width, self.height)
            cached = self._page.render_html(page_html)
        self._keep(key, cached)
        return cached[0].copy(), dict(cached[1])

    def _keep(self, key: str, render: Any) -> None:
        self._renders[key] = render
        while len(self._renders) > _RENDER_CACHE:
            self._renders.pop(next(iter(self._renders)))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_page"] = None  # the browser stays with this process; a copy opens its own page
        state["_renders"] = {}
        state["_scenes"] = None
        return state

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        if self.source == "miniwob":
            return self._generate_miniwob(rng)
        for _ in range(20):
            form = generate_form(rng, self.split, width=self.width, height=self.height)
            shot, boxes = self._render_page(form.html)
            visible = [e for e in form.elements if e.gid in boxes and self._on_screen(boxes[e.gid])]
            if any(e.role in TARGET_ROLES for e in visible):
                break
        else:  # pragma: no cover - every generated form has on-screen elements at the minimum size
            raise RuntimeError("could not generate a form with a visible element in 20 draws")
        target, instruction, kind = describe_target(form, visible, rng)
        digest = hashlib.sha256(f"{form.html}\n{target.gid}\n{instruction}".encode()).hexdigest()[:16]
        return self._set_scene(shot, boxes, visible, target, instruction, kind, digest, {"layout": form.layout})

    def _generate_miniwob(self, rng: random.Random) -> Task:
        for _ in range(20):
            page = rng.choice(pages(self.split))
            page_seed = rng.randrange(2**31)
            shot, found = self._miniwob_scene(page, page_seed)
            boxes = {str(i): box for i, (_, _, box) in enumerate(found)}
            visible = [Element(str(i), role, name) for i, (role, name, box) in enumerate(found) if self._on_screen(box)]
            counts: dict[tuple[str, str], int] = {}
            for e in visible:
                counts[(e.role, e.name)] = counts.get((e.role, e.name), 0) + 1
            # a target is named by its role and text: only elements that pair names uniquely
            candidates = [e for e in visible if e.role in TEMPLATES and e.name and counts[(e.role, e.name)] == 1]
            if candidates:
                break
        else:  # pragma: no cover - every listed page starts with named controls
            raise RuntimeError("could not draw a MiniWoB scene with a named control in 20 draws")
        target = rng.choice(candidates)
        instruction, kind = name_element(target.role, target.name, rng)
        digest = hashlib.sha256(f"{page}\n{page_seed}\n{target.gid}\n{instruction}".encode()).hexdigest()[:16]
        extra = {"page": page, "page_seed": page_seed}
        return self._set_scene(shot, boxes, visible, target, instruction, kind, digest, extra)

    def _miniwob_scene(self, page: str, page_seed: int) -> tuple[np.ndarray, list[Any]]:
        key = f"miniwob:{page}:{page_seed}"
        cached = self._renders.pop(key, None)
        if cached is None:
            if self._scenes is None:
                self._scenes = MiniWoBScenes(MINIWOB_SCALE)
            cached = self._scenes.scene(page, page_seed)
        self._keep(key, cached)
        return cached[0].copy(), list(cached[1])

    def _set_scene(
        self,
        shot: np.ndarray,
        boxes: dict[str, tuple[int, int, int, int]],
        visible: list[Element],
        target: Element,
        instruction: str,
        kind: str,
        digest: str,
        extra: dict[str, Any],
    ) -> Task:
        self._shot = shot
        self._target = tuple(float(v) for v in boxes[target.gid])  # type: ignore[assignment]
        self._instruction = instruction
        self._elements = self._element_list(visible, boxes)
        return Task(
            id=f"{self.source}-{digest}",
            goal=instruction,
            difficulty=kind,
            extra={"source": self.source, "kind": kind, **extra, "screen": [self.width, self.height]},
        )

    def _on_screen(self, box: tuple[int, int, int, int]) -> bool:
        x1, y1, x2, y2 = box
        return 0 <= x1 and 0 <= y1 and x2 <= self.width and y2 <= self.height and min(x2 - x1, y2 - y1) >= _MIN_SIDE

    @staticmethod
    def _element_list(visible: list[Element], boxes: dict[str, tuple[int, int, int, int]]) -> list[dict[str, Any]]:
        ordered = sorted(visible, key=lambda e: (boxes[e.gid][1], boxes[e.gid][0]))
        return [
            {"id": i, "role": e.role, "name": e.name, "box": list(boxes[e.gid])} for i, e in enumerate(ordered, start=1)
        ]

    def _intro(self) -> str:
        return ""

    def _observe(self) -> str:
        forms = {"any": "click(x, y) or box(x1, y1, x2, y2)", "point": "click(x, y)", "box": "box(x1, y1, x2, y2)"}
        lines = [
            f"Instruction: {self._instruction}",
            f"Screen: {self.width}x{self.height} pixels, origin at the top left. Answer with {forms[self.answer]}.",
        ]
        if self.obs == "text":
            lines.append('Elements ([id] role "name" box=(x1, y1, x2, y2)):')
            lines.extend(
                f'[{e["id"]}] {e["role"]} "{e["name"]}" box=({", ".join(map(str, e["box"]))})' for e in self._elements
            )
        return "\n".join(lines)

    def _parse(self, text: str) -> tuple[str, tuple[float, ...]]:
        kind, values = parse_answer(text, self.width, self.height)
        if self.answer != "any" and kind != self.answer:
            wanted = "click(x, y)" if self.answer == "point" else "box(x1, y1, x2, y2)"
            raise InvalidAction(f"this task takes {wanted} answers only.")
        return kind, values

    def _apply(self, action: tuple[str, tuple[float, ...]]) -> Transition:
        kind, values = action
        rewards = score_answer(kind, values, self._target, self.width, self.height)
        hit = rewards["hit_reward"] > 0
        shown = ", ".join(f"{v:g}" for v in values)
        what = f"click({shown})" if kind == "point" else f"box({shown})"
        verdict = "hit the target" if hit else "missed the target"
        return Transition(f"Your answer {what} {verdict}.\n\n{self._observe()}", rewards, terminated=True, success=hit)

    def sample_action(self, rng: random.Random) -> str:
        """A uniform point on the screen (a box of random corners one time in five, when boxes are
        accepted)."""
        if self.answer == "box" or (self.answer == "any" and rng.random() < 0.2):
            x1, x2 = sorted(rng.sample(range(self.width + 1), 2))
            y1, y2 = sorted(rng.sample(range(self.height + 1), 2))
            return f"box({x1}, {y1}, {x2}, {y2})"
        return f"click({rng.randint(0, self.width - 1)}, {rng.randint(0, self.height - 1)})"

    # ------------------------------------------------------------------ public API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        text, info = super().reset(seed=seed, options=options)
        info["elements"] = [dict(e) for e in self._elements]
        return self._wrap(text), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        text, reward, terminated, truncated, info = super().step(action)
        info["elements"] = [dict(e) for e in self._elements]
        return self._wrap(text), reward, terminated, truncated, info

    def _wrap(self, text: str) -> Any:
        if self.obs == "text":
            return text
        # A fresh array per call: callers keep observations, and Gymnasium's checker proves none is reused.
        return {"instruction": text, "screenshot": self._shot.copy()}

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return self._shot.copy()
        return super().render()

    def close(self) -> None:
        super().close()
        if self._page is not None:
            self._page.close()
            self._page = None
        if self._scenes is not None:
            self._scenes.close()
            self._scenes = None
