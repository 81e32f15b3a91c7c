"""Rule-based driver for ``envgym/Drive-*`` (text view): IDM-style speed keeping and lane-change rules.

It reads only the observation text (the scene lines :class:`DriveEnv` writes) and
``info["admissible_actions"]``, and answers with an action name.

* **Lane scenarios** (highway, merge). The gap wanted to the vehicle ahead is IDM's
  ``s* = s0 + v T + v dv / (2 sqrt(a b))`` (highway-env's IDM constants: ``s0 = 10`` m from
  the front bumper, i.e. 5 m plus a car length, ``T = 1.5`` s, ``a = 3``, ``b = 5`` m/s^2; ``dv`` =
  your speed minus theirs). When the gap ahead is short of ``s*`` (or the time to collision is
  under 4 s) it changes to the adjacent lane with the longest free gap ahead if that lane's rear
  is safe (MOBIL-like: the follower there is at least 8 m back and not closing within 3 s);
  otherwise it slows down. With room it speeds up when the gap would still hold at the next target
  speed, and moves one lane right when the right lane is at least as free (highway-env rewards the
  right-hand lanes).
* **Junction scenarios** (roundabout, intersection). It slows down when a vehicle ahead of it or
  beside it closes in with a time to collision under 3.5 s or sits within 12 m in its path, and
  speeds up otherwise.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "choose", "desired_gap", "parse_scene"]

_SCENARIO = re.compile(r"^Scenario: (\w+)\.", re.MULTILINE)
_LANE = re.compile(r"You are in lane (\d+) of (\d+)\.")
_SPEED = re.compile(r"Your speed: ([\d.]+) m/s \(target ([\d.]+) m/s")
_LANE_LINE = re.compile(
    r"^- lane (\d+) of \d+ \((yours|left|right)(?:, ends in (\d+) m)?\): ahead: (.*?); behind: (.*)$", re.MULTILINE
)
_GAP = re.compile(r"gap (-?[\d.]+) m, relative speed ([+-][\d.]+) m/s(?:, time to collision ([\d.]+) s)?")
_ALONGSIDE = re.compile(r"alongside you")
_JUNCTION = re.compile(
    r"^- vehicle ([\d.]+) m (ahead|behind) and ([\d.]+) m to your (left|right): speed ([\d.]+) m/s, "
    r"heading ([+-]\d+) deg from yours, distance (-?[\d.]+) m, (?:closing at ([\d.]+) m/s|not closing)"
    r"(?:, closest approach ([\d.]+) m)?"
    r"(?:, time to collision ([\d.]+) s)?",
    re.MULTILINE,
)

#: IDM constants of highway-env's vehicles (m, s, m/s^2).
S0, T_HEADWAY, A_MAX, B_COMF = 10.0, 1.5, 3.0, 5.0
#: Junction rules: (slow down for a risk within s, hold the speed for one within s, closest-approach
#: margin in m). The intersection's 13 s leave about 4 s to wait, so it brakes later.
JUNCTION_RULES = {"roundabout": (4.0, 7.0, 8.0), "intersection": (3.0, 3.0, 3.5)}
#: A lane that ends within this many seconds at the current speed is not used.
LANE_END_SECONDS = 6.0
#: Speed step of the meta-actions on the highway (m/s).
SPEED_STEP = 5.0


@dataclass(frozen=True)
class Other:
    """A vehicle as the text shows it (``ttc`` is ``inf`` when not closing)."""

    gap: float
    rel: float = 0.0
    ttc: float = math.inf
    forward: float = 0.0
    left: float = 0.0
    approach: float = math.inf


@dataclass
class Parsed:
    scenario: str = ""
    lane: int = 1
    lanes: int = 1
    speed: float = 0.0
    target: float = 0.0
    ahead: dict[int, Other | None] | None = None
    behind: dict[int, Other | None] | None = None
    nearby: list[Other] | None = None
    ends: dict[int, float] | None = None


def _other(text: str) -> Other | None:
    if _ALONGSIDE.search(text):
        return Other(gap=0.0, ttc=0.0)
    m = _GAP.search(text)
    if m is None:
        return None
    return Other(gap=float(m.group(1)), rel=float(m.group(2)), ttc=float(m.group(3)) if m.group(3) else math.inf)


def parse_scene(observation: str) -> Parsed:
    """The last scene in ``observation`` as numbers."""
    start = observation.rfind("Scenario: ")
    text = observation[start:] if start >= 0 else observation
    p = Parsed(ahead={}, behind={}, nearby=[], ends={})
    if m := _SCENARIO.search(text):
        p.scenario = m.group(1)
    if m := _LANE.search(text):
        p.lane, p.lanes = int(m.group(1)), int(m.group(2))
    if m := _SPEED.search(text):
        p.speed, p.target = float(m.group(1)), float(m.group(2))
    for m in _LANE_LINE.finditer(text):
        lane = int(m.group(1))
        p.ahead[lane] = _other(m.group(4))  # type: ignore[index]
        p.behind[lane] = _other(m.group(5))  # type: ignore[index]
        if m.group(3) is not None:
            p.ends[lane] = float(m.group(3))  # type: ignore[index]
    for m in _JUNCTION.finditer(text):
        forward = float(m.group(1)) * (1 if m.group(2) == "ahead" else -1)
        left = float(m.group(3)) * (1 if m.group(4) == "left" else -1)
        ttc = float(m.group(10)) if m.group(10) else math.inf
        approach = float(m.group(9)) if m.group(9) else math.inf
        closing = float(m.group(8)) if m.group(8) else 0.0
        p.nearby.append(  # type: ignore[union-attr]
            Other(gap=float(m.group(7)), rel=-closing, ttc=ttc, forward=forward, left=left, approach=approach)
        )
    return p


def desired_gap(speed: float, rel: float) -> float:
    """IDM's desired gap ``s0 + v T + v dv / (2 sqrt(a b))`` with ``dv = -rel`` (closing > 0)."""
    dv = -rel
    return S0 + speed * T_HEADWAY + speed * dv / (2.0 * math.sqrt(A_MAX * B_COMF))


def _rear_safe(other: Other | None) -> bool:
    return other is None or (other.gap > 8.0 and other.ttc > 3.0)


def _lane_free(ahead: Other | None) -> float:
    return math.inf if ahead is None else ahead.gap


def choose(p: Parsed, actions: list[str]) -> str:
    """The action for a parsed scene among ``actions`` (names)."""

    def pick(*names: str) -> str:
        for name in names:
            if name in actions:
                return name
        return "IDLE" if "IDLE" in actions else actions[0]

    if p.scenario in ("roundabout", "intersection"):
        # Paths are curved and decisions 1 s apart: a wide margin around the straight-line
        # closest approach, and a look a few seconds ahead.
        brake, hold, margin = JUNCTION_RULES[p.scenario]

        def risky(o: Other, seconds: float) -> bool:
            closing = -o.rel
            soon = closing > 0 and o.gap / closing < seconds
            return o.forward > -3.0 and (o.ttc < seconds or (soon and o.approach < margin))

        nearby = p.nearby or []
        blocked = any(0.0 < o.forward < 10.0 + p.speed and abs(o.left) < 2.5 for o in nearby)
        if blocked or any(risky(o, brake) for o in nearby):
            return pick("SLOWER")
        if any(risky(o, hold) for o in nearby):
            return pick("IDLE")
        return pick("FASTER")

    ahead, behind, ends = p.ahead or {}, p.behind or {}, p.ends or {}
    horizon = max(p.speed, 10.0) * LANE_END_SECONDS

    def usable(lane: int) -> bool:
        return lane in ahead and ends.get(lane, math.inf) > horizon

    own = ahead.get(p.lane)
    # A vehicle about to join from the right (an on-ramp) ahead of us: make room on the left, or slow down.
    joining = [o for o in p.nearby or [] if o.left < 0 and -5.0 < o.forward < 3.0 * max(p.speed, 10.0)]
    if joining and p.lane == max(lane for lane in ahead if ends.get(lane, math.inf) > horizon):
        if "LANE_LEFT" in actions and usable(p.lane - 1) and _rear_safe(behind.get(p.lane - 1)):
            return "LANE_LEFT"
        if any(o.ttc < 6.0 or abs(o.forward) < 15.0 for o in joining):
            return pick("SLOWER")
    if not usable(p.lane):  # our lane ends soon: leave it (left, where lanes continue)
        if "LANE_LEFT" in actions and usable(p.lane - 1) and _rear_safe(behind.get(p.lane - 1)):
            return "LANE_LEFT"
        return pick("SLOWER")
    wanted = desired_gap(p.speed, own.rel) if own is not None else 0.0
    pressed = own is not None and (own.gap < wanted or own.ttc < 4.0)
    if pressed:
        best: tuple[float, str] | None = None
        for lane, name in ((p.lane - 1, "LANE_LEFT"), (p.lane + 1, "LANE_RIGHT")):
            if name not in actions or not usable(lane):
                continue
            there = ahead[lane]
            room = _lane_free(there)
            need = desired_gap(p.speed, there.rel) + 10.0 if there is not None else 0.0
            if room > need and _rear_safe(behind.get(lane)) and (best is None or room > best[0]):
                best = (room, name)
        if best is not None:
            return best[1]
        if "SLOWER" in actions:
            return "SLOWER"
        # Already at the lowest target speed: any adjacent lane with more room and a safe rear.
        for lane, name in ((p.lane + 1, "LANE_RIGHT"), (p.lane - 1, "LANE_LEFT")):
            if (
                name in actions
                and usable(lane)
                and _lane_free(ahead[lane]) > own.gap + 5.0
                and _rear_safe(behind.get(lane))
            ):
                return name
        return pick("SLOWER")
    right = p.lane + 1
    if (
        not joining
        and "LANE_RIGHT" in actions
        and usable(right)
        and _lane_free(ahead[right]) >= max(_lane_free(own), 3.0 * desired_gap(p.speed, 0.0))
        and _rear_safe(behind.get(right))
    ):
        return "LANE_RIGHT"
    faster = p.speed + SPEED_STEP
    if own is None or own.gap > desired_gap(faster, own.rel - SPEED_STEP) + 10.0:
        return pick("FASTER")
    return "IDLE" if "IDLE" in actions else pick("SLOWER")


class Solver(Policy):
    """Rule-based driver (see the module docstring)."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self.seed = seed

    def act(self, observation: str, info: dict[str, Any]) -> str:
        actions = list(info.get("admissible_actions") or [])
        if not actions:
            return "IDLE"
        return choose(parse_scene(observation), actions)
