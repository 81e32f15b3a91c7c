"""Train on envgym environments with verl: write the data files and the agent-loop YAML, print the command.

verl rolls out multi-turn episodes through agent loops; ``envgym.integrations.verl`` provides one
(``envgym_agent``) that plays an envgym episode per dataset row, with the episode's return (the
env's rubric) as the reward. This script writes what a verl run needs:

* ``train.parquet`` / ``val.parquet``: one row per seed (``agent_name: envgym_agent``, the episode
  settings in ``extra_info["envgym"]``; train and test seeds apart);
* ``envgym_agent_loops.yaml``: the agent-loop entry verl loads (``_target_:
  envgym.integrations.verl.EnvgymAgentLoop``);

and prints the ``verl.trainer.main_ppo`` overrides that use them (GRPO; vLLM rollout on GPUs).

    python examples/verl_agent_loop.py --env-id envgym/Wordle-v0 --out runs/verl-wordle
    python examples/verl_agent_loop.py --smoke        # a temporary folder, files read back and checked
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

import pandas as pd

from envgym.integrations import verl as envgym_verl
from envgym.integrations.episode import EpisodeSettings


def write_files(out: Path, env_id: str, train_seeds: range, val_seeds: range, max_turns: int) -> dict[str, Path]:
    """The two data files and the YAML in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"train": out / "train.parquet", "val": out / "val.parquet", "yaml": out / "envgym_agent_loops.yaml"}
    pd.DataFrame(envgym_verl.dataset_rows(env_id, train_seeds)).to_parquet(paths["train"])
    pd.DataFrame(envgym_verl.dataset_rows(env_id, val_seeds, split="test")).to_parquet(paths["val"])
    paths["yaml"].write_text(envgym_verl.agent_loop_yaml(max_turns=max_turns))
    return paths


def command(paths: dict[str, Path], model: str, max_turns: int) -> list[str]:
    """The verl PPO trainer's overrides for a GRPO run on the files."""
    return [
        "python",
        "-m",
        "verl.trainer.main_ppo",
        "algorithm.adv_estimator=grpo",
        f"data.train_files={paths['train']}",
        f"data.val_files={paths['val']}",
        "data.return_raw_chat=true",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={max_turns}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={paths['yaml']}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={envgym_verl.AGENT_NAME}",
    ]


def check(paths: dict[str, Path], env_id: str) -> int:
    """Read the files back as verl would and check every row's episode settings; return the row count."""
    rows = 0
    for split in ("train", "val"):
        frame = pd.read_parquet(paths[split])
        for record in frame.to_dict("records"):
            settings = EpisodeSettings.from_mapping(record["extra_info"]["envgym"])
            assert settings.env_id == env_id and record["agent_name"] == envgym_verl.AGENT_NAME
            rows += 1
    assert envgym_verl.AGENT_LOOP_TARGET in paths["yaml"].read_text()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="envgym/Wordle-v0", help="an envgym single-agent text id")
    parser.add_argument("--out", type=Path, default=Path("runs/verl-envgym"), help="folder for the files")
    parser.add_argument("--train-seeds", type=int, default=512, help="training rows (seeds 0..N-1)")
    parser.add_argument("--val-seeds", type=int, default=64, help="validation rows (seeds after the training ones)")
    parser.add_argument("--max-turns", type=int, default=8, help="turns per episode")
    parser.add_argument("--model", default="Qwen/Qwen2.5-1.5B-Instruct", help="the policy verl trains")
    parser.add_argument("--smoke", action="store_true", help="a few rows in a temporary folder, read back and checked")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) if args.smoke else args.out
        n_train, n_val = (4, 2) if args.smoke else (args.train_seeds, args.val_seeds)
        train, val = range(n_train), range(n_train, n_train + n_val)
        paths = write_files(out, args.env_id, train, val, args.max_turns)
        rows = check(paths, args.env_id)
        print(shlex.join(command(paths, args.model, args.max_turns)))
        print(f"{rows} rows and the agent-loop YAML in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
