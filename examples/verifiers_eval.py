"""Evaluate a model on an envgym environment with verifiers' own eval command (``vf-eval``).

envgym's verifiers plugin (``envgym.integrations.verifiers``) turns any single-agent envgym id
into a verifiers environment: one row per seed, the episode played turn by turn, the episode
return as the reward and each reward component as a metric. This script runs ``vf-eval``'s own
entry point on it (through ``envgym.integrations.verifiers.main``, which makes the plugin
importable; ``python -m envgym.integrations.verifiers`` on the command line) against an
OpenAI-compatible server, then prints one line per episode from the run's ``traces.jsonl``.

    # a model served by vLLM (or any OpenAI-compatible server)
    python examples/verifiers_eval.py --env-id envgym/Wordle-v0 --seeds 0 1 2 \\
        --model Qwen/Qwen2.5-7B-Instruct --base-url http://127.0.0.1:8000/v1
    # the smoke run: the test suite's fake server replies the oracle's moves (seeds 0, 1)
    # and a wrong move (seed 2), so the table is known in advance
    python examples/verifiers_eval.py --smoke

The same run with the ``vf-eval`` command itself::

    PYTHONPATH=$(python -c "import envgym.integrations.verifiers as m; print(m.plugin_dir())") \\
        vf-eval envgym-verifiers --env.taskset.env-id envgym/Wordle-v0 --env.taskset.seeds '[0,1,2]' \\
        -m MODEL --client.base-url http://127.0.0.1:8000/v1 --client.api-key-var OPENAI_API_KEY --no-push
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SMOKE_ENV = "envgym/FrozenLake-v0"
SMOKE_SEEDS = (0, 1, 2)
SMOKE_MAX_TURNS = 4


@contextlib.contextmanager
def smoke_server(env_id: str, seeds: tuple[int, ...]) -> Iterator[str]:
    """The test suite's fake OpenAI server, replying the oracle's actions for every seed but the
    last, whose episode gets the invalid move ``jump``. Yields its base URL."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from openai_server import FakeOpenAIServer

    import envgym
    from envgym.rollout import Conversation, PromptConfig, RunConfig, run, tasks_for

    oracle = run(RunConfig(agent="oracle", tasks=tasks_for(env_id, seeds[:-1])))
    plans: dict[str, list[str]] = {}
    env = envgym.make(env_id)
    for traj in oracle.trajectories:
        observation, info = env.reset(seed=traj.seed)
        first = Conversation(PromptConfig(), env_id, observation, info).messages()[-1]["content"]
        plans[first] = [turn.action for turn in traj.turns]
    env.close()

    def reply(messages: list[dict[str, Any]]) -> str:
        first = next(m["content"] for m in messages if m["role"] == "user")
        turn = sum(m["role"] == "assistant" for m in messages)
        plan = plans.get(first, [])
        return plan[turn] if turn < len(plan) else "jump"

    with FakeOpenAIServer(action=reply, model="fake-model") as server:
        yield server.url


def evaluate(
    env_id: str, seeds: list[int], max_turns: int | None, model: str, base_url: str, api_key_var: str, out: Path
) -> list[dict[str, Any]]:
    """Run verifiers' eval on the envgym plugin; returns the episodes of ``traces.jsonl``."""
    from envgym.integrations import verifiers as envgym_verifiers

    argv = [
        "envgym-verifiers",
        "--env.taskset.env-id",
        env_id,
        "--env.taskset.seeds",
        json.dumps(seeds),
        "-m",
        model,
        "--client.base-url",
        base_url,
        "--client.api-key-var",
        api_key_var,
        "--no-push",
        "--no-rich",
        "-o",
        str(out),
        "--run.name",
        "envgym",
    ]
    if max_turns is not None:
        argv += ["--env.taskset.max-turns", str(max_turns)]
    os.environ.setdefault(api_key_var, "EMPTY")
    # vf-eval prints every trace as JSON on stdout; this script prints its own table instead.
    with contextlib.redirect_stdout(io.StringIO()):
        envgym_verifiers.main(argv)
    lines = (out / "envgym" / "traces.jsonl").read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda e: e["task"]["data"]["seed"])


def table(episodes: list[dict[str, Any]]) -> str:
    header = f"{'env_id':<28} {'seed':>5} {'return':>8} {'success':>8} {'turns':>6}  termination"
    lines = [header]
    for episode in episodes:
        data = episode["task"]["data"]
        if not episode["ok"]:
            lines.append(f"{data['env_id']:<28} {data['seed']:>5} {'error':>8}  {episode['errors'][-1]['message']}")
            continue
        trace = episode["traces"][0]
        metrics = trace["metrics"]
        reward = trace["rewards"]["episode_return"]["score"]
        reason = trace["info"]["envgym"]["termination_reason"]
        lines.append(
            f"{data['env_id']:<28} {data['seed']:>5} {reward:>8.3f} {metrics['success']:>8.0f} "
            f"{metrics['turns']:>6.0f}  {reason}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default=SMOKE_ENV)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SMOKE_SEEDS))
    parser.add_argument("--max-turns", type=int, default=None, help="envgym's harness turn limit")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible API root (http://HOST:PORT/v1)")
    parser.add_argument("--api-key-var", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--out", type=Path, default=None, help="vf-eval's output folder (default: a temporary one)")
    parser.add_argument("--smoke", action="store_true", help="fake server with known replies, FrozenLake seeds 0-2")
    args = parser.parse_args()
    if args.smoke:
        args.env_id, args.seeds, args.max_turns = SMOKE_ENV, list(SMOKE_SEEDS), SMOKE_MAX_TURNS
    elif args.base_url is None:
        parser.error("--base-url is required (or --smoke)")
    with contextlib.ExitStack() as stack:
        out = args.out or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        base_url = stack.enter_context(smoke_server(args.env_id, tuple(args.seeds))) if args.smoke else args.base_url
        episodes = evaluate(args.env_id, args.seeds, args.max_turns, args.model, base_url, args.api_key_var, out)
    print(table(episodes))


if __name__ == "__main__":
    main()
