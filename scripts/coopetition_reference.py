"""Record reference trajectories from Coopetition-Gym's own Gymnasium API (the numbers envgym must give).

envgym reimplements Coopetition-Gym v1 (Pant & Yu; github.com/vikpant/strategic-coopetition,
checked at commit d2dffd5103); the package is not on PyPI, so the tests cannot run it. This
script runs the upstream environments once, on a checkout of that repository, and writes what
they return for fixed, seeded action sequences to
``tests/environments/coopetition/reference/<Name>.json.gz``; the tests replay the same actions on
envgym's environments and compare. Upstream's Gymnasium API is the reference (its PettingZoo
wrappers skip some environments' own ``reset``/``step``).

Usage (in a virtualenv with numpy, scipy, gymnasium and pettingzoo)::

    git clone https://github.com/vikpant/strategic-coopetition && git -C strategic-coopetition checkout d2dffd5103
    python scripts/coopetition_reference.py strategic-coopetition/coopetition_gym [Name ...]

Each file holds, per run (seed x reward mode), the actions sent and, per step, the reward
vector, terminated, truncated, and, for the first steps of the integrated runs, the observation and ``info``; plus, per
seed, a full-horizon run's length and summed rewards. Games in :data:`HIDDEN` draw a hidden parameter
at reset from a generator upstream does not seed: the script pins that generator per seed (so every
run of a seed, and every recording, draws the same value) and records the value under
``"hidden"``; the game's ``prepare_reference`` sets it before a replay.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "environments" / "coopetition" / "reference"
SEEDS = (0, 1)
STEPS = 25
#: Observations and infos are recorded for the first OBS_STEPS steps of the first mode's runs.
OBS_STEPS = 10
#: (reward_type, normalize_rewards, reward_scale)
MODES = (("private", False, 1.0), ("integrated", False, 1.0), ("cooperative", False, 1.0), ("integrated", True, 2.0))
#: Games whose reset draws from upstream's unseeded generator: name -> {recorded key: upstream attribute}.
HIDDEN = {"SynergySearch": {"true_gamma": "_true_gamma"}}


def actions_for(endowments: np.ndarray, seed: int, steps: int) -> list[list[float]]:
    """Seeded action sequences that exercise cooperation, defection and recovery.

    Phases of ten steps: high cooperation (70-100 % of the endowment), free play (uniform),
    defection (0-15 %), free play; rounded to 0.01 so the JSON holds them exactly.
    """
    rng = np.random.default_rng(1000 + seed)
    rows = []
    for t in range(steps):
        phase = (t // 10) % 4
        low, high = {0: (0.7, 1.0), 1: (0.0, 1.0), 2: (0.0, 0.15), 3: (0.0, 1.0)}[phase]
        rows.append([round(float(rng.uniform(low, high) * e), 2) for e in endowments])
    return rows


def plain(value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, str) or value is None:
        return value
    return str(value)


def configure(env, mode: tuple[str, bool, float]):
    base = env.unwrapped
    base.reward_type, base.normalize_rewards, base.reward_scale = mode
    return env


def reset(env, name: str, seed: int, result: dict) -> None:
    """``env.reset(seed=seed)``, pinning and recording a hidden draw first (see :data:`HIDDEN`)."""
    base = env.unwrapped
    if name in HIDDEN:
        # Upstream draws before seeding; a generator envgym's splits never use for this seed.
        base._np_random = np.random.default_rng([seed, 99])
    env.reset(seed=seed)
    if name in HIDDEN:
        drawn = {key: plain(getattr(base, attr)) for key, attr in HIDDEN[name].items()}
        assert result["hidden"].setdefault(str(seed), drawn) == drawn, f"{name} seed={seed}: the pinned draw moved"


def record(cg, name: str) -> dict:
    result: dict = {"env": name, "upstream_commit": "d2dffd5103", "runs": [], "full": []}
    if name in HIDDEN:
        result["hidden"] = {}
    for seed in SEEDS:
        probe = cg.make(f"{name}-v0")
        endowments = np.asarray(probe.unwrapped.endowments, dtype=np.float64)
        horizon = int(probe.unwrapped.max_steps)
        actions = actions_for(endowments, seed, max(horizon, STEPS))
        for mode in MODES:
            env = configure(cg.make(f"{name}-v0"), mode)
            reset(env, name, seed, result)
            steps = []
            detailed = mode == MODES[1]
            for t, row in enumerate(actions[:STEPS]):
                obs, rewards, terminated, truncated, info = env.step(np.asarray(row, dtype=np.float32))
                step = {
                    "rewards": plain(np.asarray(rewards)),
                    "terminated": bool(terminated),
                    "truncated": bool(truncated),
                }
                if detailed and t < OBS_STEPS:
                    step.update(obs=plain(obs), info=plain(info))
                steps.append(step)
                if terminated or truncated:
                    break
            result["runs"].append({"seed": seed, "mode": list(mode), "actions": actions[: len(steps)], "steps": steps})
        env = configure(cg.make(f"{name}-v0"), ("integrated", False, 1.0))
        reset(env, name, seed, result)
        total = np.zeros(len(endowments))
        length = 0
        for row in actions:
            _, rewards, terminated, truncated, _ = env.step(np.asarray(row, dtype=np.float32))
            total += np.asarray(rewards, dtype=np.float64)
            length += 1
            if terminated or truncated:
                break
        result["full"].append(
            {
                "seed": seed,
                "horizon": horizon,
                "length": length,
                "terminated": bool(terminated),
                "returns": plain(total),
            }
        )
    return result


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    sys.path.insert(0, str(Path(argv[0]).resolve()))
    import coopetition_gym as cg

    names = argv[1:] or [n.removesuffix("-v0") for n in cg.list_environments()]
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        data = record(cg, name)
        path = OUT / f"{name}.json.gz"
        path.write_bytes(gzip.compress((json.dumps(data, separators=(",", ":")) + "\n").encode(), mtime=0))
        print(f"{name}: {path.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
