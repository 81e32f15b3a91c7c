"""``envgym new-family NAME``: stamp a working environment family that keeps the family contract.

The skeleton is a small, complete family (:mod:`envgym.families` lists what that means): a text
environment with an env card, its specs and contract data, an oracle solver, a benchmark suite, a
perf script and tests. Every file is plain text from the templates below with the names filled
in; nothing is written unless every file is new, so a second run or a typo never overwrites work.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path
from string import Template
from typing import Annotated

import typer

from envgym.cli._common import EXIT_USAGE, echo_json, fail, handle_errors, out_console
from envgym.cli._options import JsonOption
from envgym.errors import EnvgymError
from envgym.families import checkout_root

__all__ = ["FAMILY_NAME", "new_family_command", "stamp_family"]

#: A family name: a lowercase Python identifier (the package is ``envgym.environments.<name>``).
FAMILY_NAME = re.compile(r"^[a-z][a-z0-9_]{1,39}$")

_INIT = '''"""${title}: reach a target number by stepping up or down (a skeleton from ``envgym new-family``).

Only specs live here (string entry points): registering the family imports no environment code.
``envgym/${camel}-v0`` is the base id; ``-Easy`` and ``-Hard`` set ``span``.
"""

from __future__ import annotations

from envgym.registration import EnvSpec

FAMILY = "${name}"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {
    "suite": "${name}-v1",
    "perf": "benchmarks/perf/${name}.py",
    "baselines_waiver": (
        "a new family: publish the oracle and random bundles with "
        "`ENVGYM_SUITE=${name}-v1 bash scripts/publish_baselines.sh`, then delete this waiver"
    ),
}
_ENTRY = "envgym.environments.${name}.env:${cls}"
_BASE = "envgym/${camel}-v0"

SPECS: list[EnvSpec] = [
    EnvSpec(id=_BASE, entry_point=_ENTRY, family=FAMILY, summary="Reach the target number by stepping up or down"),
    *(
        EnvSpec(
            id=f"envgym/${camel}-{level}-v0",
            entry_point=_ENTRY,
            family=FAMILY,
            summary=f"Reach the target number ({level.lower()}: span {span})",
            kwargs={"span": span},
            variant_of=_BASE,
        )
        for level, span in (("Easy", 2), ("Hard", 9))
    ),
]
'''

_ENV = '''"""The ${title} environment (see :class:`${cls}`)."""

from __future__ import annotations

import random
from typing import Any, ClassVar

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError

__all__ = ["ACTIONS", "${cls}"]

ACTIONS = ("up", "down")


class ${cls}(TextEnv):
    """${title}: reach the target number by stepping up or down.

    **Description.** A skeleton stamped by ``envgym new-family``: replace these rules with your
    environment's and keep the sections. Each episode draws a start value and a target from the
    seed; targets of the ``train`` split are even and those of the ``test`` split odd, so the
    splits never share a task.

    **Observation.** At reset the goal and the action format, then ``Value: V. Target: T.``.

    **Actions.** ``up`` or ``down`` (case-insensitive); anything else is an invalid step.

    **Reward components.** ``success_reward`` 1.0 on the step that reaches the target;
    ``invalid_action_reward`` (``invalid_penalty``, default -0.1) on an invalid step;
    ``step_cost_reward`` (``step_cost``, default 0) on every step.

    **Reward basis.** The reward is the sum of every component (``success_reward``,
    ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** Terminated with success on the target; truncated after ``max_turns``
    (default 20).

    **Arguments.** ``span`` (default 5): the largest distance between the start and the target;
    and the common :class:`~envgym.core.TextEnv` arguments.

    **Version history.** ``v0``: first release.
    """

    name: ClassVar[str] = "${name}"
    reward_components: ClassVar[tuple[str, ...]] = ("success_reward", "invalid_action_reward", "step_cost_reward")
    reward_basis: ClassVar[tuple[str, ...]] = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 20

    def __init__(self, *, span: int = 5, **kwargs: Any) -> None:
        if isinstance(span, bool) or not isinstance(span, int) or span < 1:
            raise InvalidKwargsError(f"span must be an integer >= 1, got {span!r}.")
        super().__init__(**kwargs)
        self.span = span
        self.value = 0
        self.target = 0

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self.target = 2 * rng.randint(0, self.span) + (0 if self.split == "train" else 1)
        self.value = self.target + rng.choice((-1, 1)) * rng.randint(1, self.span)
        return Task(
            id=f"${name}-{self.split}-{self.value}-{self.target}",
            goal=f"Reach {self.target} from {self.value}. Answer with up or down.",
            difficulty=f"span {self.span}",
        )

    def _observe(self) -> str:
        return f"Value: {self.value}. Target: {self.target}."

    def _parse(self, text: str) -> str:
        word = text.strip().lower()
        if word not in ACTIONS:
            raise InvalidAction(f"expected 'up' or 'down', got {text!r}.")
        return word

    def _apply(self, action: str) -> Transition:
        self.value += 1 if action == "up" else -1
        if self.value == self.target:
            return Transition(f"You reached {self.target}.", {"success_reward": 1.0}, terminated=True, success=True)
        return Transition(self._observe())

    def admissible_actions(self) -> list[str]:
        return list(ACTIONS)
'''

_SOLVER = '''"""Oracle solver for ``envgym/${camel}-*``: reads the value and the target from the observation."""

from __future__ import annotations

import re
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver"]

_STATE = re.compile(r"Value: (-?\\d+)\\. Target: (-?\\d+)\\.")


class Solver(Policy):
    """Steps towards the target: the shortest solution."""

    def __init__(self, env_id: str, seed: int | None) -> None:
        self.env_id = env_id

    def act(self, observation: str, info: dict[str, Any]) -> str:
        found = _STATE.findall(observation)
        if not found:
            return "up"
        value, target = map(int, found[-1])
        return "up" if value < target else "down"
'''

_SUITE = """# envgym ${name} suite, version 1. Frozen: any change to what it runs makes ${name}-v2.
name: ${name}
version: 1
description: >
  The ${title} family: every preset on the test split. 5 tasks per entry.
defaults:
  episodes: 5
  seed: 0
  split: test
  max_turns: 20
  trials: 1
metrics: [success_rate, mean_reward, pass_hat_k, mean_turns, tokens, wall_time, format_ok_rate]
entries:
  - {name: base, env: envgym/${camel}-v0}
  - {name: easy, env: envgym/${camel}-Easy-v0}
  - {name: hard, env: envgym/${camel}-Hard-v0}
"""

_PERF = '''"""${title} performance: reset time and steps/s of every preset, in one process.

For each id: the mean wall time of ``reset(seed=i)`` over ``--resets`` seeds, then ``--steps``
steps with random valid actions, resetting whenever an episode ends (only the steps are timed).

Usage::

    python benchmarks/perf/${name}.py
    python benchmarks/perf/${name}.py --steps 50000 --json
"""

from __future__ import annotations

import argparse
import json
import random
import time

import envgym

IDS = ("envgym/${camel}-v0", "envgym/${camel}-Easy-v0", "envgym/${camel}-Hard-v0")


def measure(env_id: str, resets: int, steps: int) -> dict[str, float]:
    env = envgym.make(env_id)
    start = time.perf_counter()
    for seed in range(resets):
        env.reset(seed=seed)
    reset_ms = (time.perf_counter() - start) / resets * 1e3
    rng = random.Random(0)
    env.reset(seed=0)
    spent = 0.0
    for _ in range(steps):
        action = env.unwrapped.sample_action(rng)
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        spent += time.perf_counter() - start
        if terminated or truncated:
            env.reset(seed=rng.randrange(1 << 30))
    env.close()
    return {"reset_ms": reset_ms, "steps_per_s": steps / spent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resets", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {env_id: measure(env_id, args.resets, args.steps) for env_id in IDS}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for env_id, row in results.items():
        print(f"{env_id:40s} reset {row['reset_ms']:.3f} ms  {row['steps_per_s']:,.0f} steps/s")


if __name__ == "__main__":
    main()
'''

_TESTS = '''"""The ${title} family: the contract checker, seeded determinism, disjoint splits, the oracle."""

from __future__ import annotations

import pytest

import envgym
from envgym.testing import check_env

IDS = ("envgym/${camel}-v0", "envgym/${camel}-Easy-v0", "envgym/${camel}-Hard-v0")


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id: str) -> None:
    check_env(env_id)


def test_same_seed_same_task() -> None:
    env = envgym.make("envgym/${camel}-v0")
    first = env.reset(seed=3)[0]
    env.reset(seed=4)
    assert env.reset(seed=3)[0] == first
    env.close()


def test_splits_are_disjoint() -> None:
    tasks = {}
    for split in ("train", "test"):
        env = envgym.make("envgym/${camel}-v0", split=split)
        tasks[split] = {env.reset(seed=s)[1]["task"]["id"].split("-", 2)[2] for s in range(200)}
        env.close()
    assert tasks["train"] and tasks["test"]
    assert not tasks["train"] & tasks["test"]


@pytest.mark.parametrize("env_id", IDS)
def test_the_oracle_solves_every_seed_in_the_fewest_steps(env_id: str) -> None:
    from envgym.agents.oracle import load_solver

    env = envgym.make(env_id)
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        env_value, target = env.unwrapped.value, env.unwrapped.target
        policy = load_solver(env_id)(env_id, seed)
        turns = 0
        terminated = truncated = False
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
            turns += 1
        assert info["success"] and reward == 1.0
        assert turns == abs(target - env_value)
    env.close()


def test_an_invalid_action_is_charged_and_changes_nothing() -> None:
    env = envgym.make("envgym/${camel}-v0")
    env.reset(seed=0)
    value = env.unwrapped.value
    _, reward, terminated, _, info = env.step("sideways")
    assert not info["action_valid"] and reward == pytest.approx(-0.1) and not terminated
    assert env.unwrapped.value == value
    env.close()
'''


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part)


def _files(name: str) -> dict[str, str]:
    camel = _camel(name)
    fields = {"name": name, "camel": camel, "cls": f"{camel}Env", "title": camel}
    templates = {
        f"environments/{name}/__init__.py": _INIT,
        f"environments/{name}/env.py": _ENV,
        f"agents/solvers/{name}.py": _SOLVER,
        f"benchmarks/{name}-v1.yaml": _SUITE,
        f"benchmarks/perf/{name}.py": _PERF,
        f"tests/environments/{name}/test_{name}.py": _TESTS,
    }
    return {path: Template(text).substitute(fields) for path, text in templates.items()}


def check_family_name(name: str, existing: list[str]) -> None:
    """Refuse a name that cannot be a family package, or one that is taken."""
    if not FAMILY_NAME.match(name) or keyword.iskeyword(name) or name.endswith("_") or "__" in name:
        raise EnvgymError(
            f"a family name is a lowercase Python identifier of 2 to 40 characters (letters, digits, single "
            f"underscores; e.g. 'card_games'), got {name!r}."
        )
    if name in existing:
        raise EnvgymError(f"a family named {name!r} exists already; choose another name.")


def stamp_family(name: str, root: Path) -> list[Path]:
    """Write the skeleton of family ``name`` under the checkout ``root``; the files written.

    Raises:
        EnvgymError: a bad or taken name, or a file of the skeleton exists already (nothing is
            written then).
    """
    existing = (
        sorted(p.name for p in (root / "environments").iterdir() if p.is_dir())
        if (root / "environments").is_dir()
        else []
    )
    check_family_name(name, existing)
    files = {root / rel: text for rel, text in _files(name).items()}
    taken = [str(p.relative_to(root)) for p in files if p.exists()]
    if taken:
        raise EnvgymError(f"not stamping family {name!r}: these files exist already: {', '.join(taken)}.")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


@handle_errors
def new_family_command(
    name: Annotated[str, typer.Argument(help="The family's name: a lowercase identifier such as 'card_games'.")],
    root: Annotated[
        Path | None,
        typer.Option("--root", help="The checkout to stamp into (default: the one envgym runs from)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Stamp a new environment family that keeps the family contract (env, card, specs, oracle,
    suite, perf script, tests); docs/family-contract.md says what each part is for."""
    if root is None:
        root = checkout_root()
    if not root.is_dir():
        fail(f"--root {str(root)!r} is not a folder: give the checkout to stamp the family into.", EXIT_USAGE)
    try:
        written = stamp_family(name, root)
    except EnvgymError as err:
        fail(str(err), EXIT_USAGE)
        return
    rel = [str(p.relative_to(root)) for p in written]
    if as_json:
        echo_json({"family": name, "root": str(root), "files": rel})
        return
    console = out_console()
    console.print(f"Stamped family {name!r} in {root}:")
    for path in rel:
        console.print(f"  {path}")
    console.print(
        f"Next: pytest tests/environments/{name} tests/test_family_contract.py; then replace the rules, and publish "
        f"the baselines (ENVGYM_SUITE={name}-v1 bash scripts/publish_baselines.sh) to drop the waiver."
    )
