"""Run envgym's verl agent loop the way verl's ``AgentLoopWorker`` runs an agent loop, and print JSON.

Used by ``tests/integrations/test_verl.py`` in a subprocess (it installs import stand-ins for
verl's missing dependencies, see :mod:`verl_standins`, which must not leak into the test process).

The worker's part, done here: load the agent-loop YAML (``envgym.integrations.verl.agent_loop_yaml``)
into verl's registry, look the loop up by ``agent_name``, construct it from the entry's
``_target_`` with the entry's keys and the worker's keyword arguments (``trainer_config``,
``server_manager``, ``tokenizer``, ``processor``, ``dataset_cls``, ``data_config``,
``hf_model_type``) and await ``run(sampling_params, **row_fields)``. What verl's worker does with
hydra (``instantiate`` the ``_target_``) is done by importing the ``_target_``. The rollout server is either
scripted (replies given as text, tokenized as vLLM returns them: the reply's ids then the
end-of-turn token) or the tiny test model generating for real.

Input (stdin): ``{"scenarios": [{"name", "row" | "dataset_row": [env_id, seed], "replies" | "tiny": max_new_tokens,
"response_length", "max_assistant_turns", "envgym"}]}``. Output (stdout): one JSON result per scenario.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import os

import verl_standins

# scripts/setup.sh installs verl off sys.path (its wheel ships top-level `tests` and `scripts`).
if os.environ.get("ENVGYM_TEST_VERL_PATH"):
    sys.path.append(os.environ["ENVGYM_TEST_VERL_PATH"])
STANDINS = verl_standins.install()

import torch
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
from verl.workers.rollout.replica import TokenOutput

import envgym.integrations.verl
from envgym import models
from envgym.errors import EnvgymError


class ScriptedServer:
    """verl's ``LLMServerClient.generate`` contract, answering with the given replies in order."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer, self.replies, self.prompts = tokenizer, list(replies), []
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any):
        self.prompts.append(list(prompt_ids))
        text = self.replies.pop(0)
        return TokenOutput(token_ids=self.tokenizer.encode(text, add_special_tokens=False) + [self.end])


class TinyModelServer:
    """The tiny test model generating greedily, with the log-prob of each token (as vLLM reports them)."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int) -> None:
        self.model, self.tokenizer, self.max_new_tokens, self.prompts, self.replies = (
            model, tokenizer, max_new_tokens, [], []
        )  # fmt: skip

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any):
        self.prompts.append(list(prompt_ids))
        ids = torch.tensor([prompt_ids])
        with torch.no_grad():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new = out.sequences[0, len(prompt_ids) :].tolist()
        logprobs = [float(torch.log_softmax(s[0], -1)[t]) for s, t in zip(out.scores, new, strict=True)]
        self.replies.append(self.tokenizer.decode(new, skip_special_tokens=True))
        return TokenOutput(token_ids=new, log_probs=logprobs)


def make_loop(agent_name: str, server: Any, tokenizer: Any, scenario: dict, folder: Path) -> Any:
    """The loop as verl's AgentLoopWorker builds it: the YAML of rollout.agent.agent_loop_config_path
    loaded into the registry, then the entry's ``_target_`` called with the entry's other keys and
    the worker's arguments (hydra's ``instantiate``, done here by import)."""
    path = folder / f"{agent_name}.yaml"
    path.write_text(envgym.integrations.verl.agent_loop_yaml(agent_name, **scenario.get("envgym", {})))
    for entry in OmegaConf.load(path):
        _agent_loop_registry[entry.name] = entry
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 4096,
                    "response_length": scenario.get("response_length", 4096),
                    "multi_turn": {"max_assistant_turns": scenario.get("max_assistant_turns")},
                }
            },
            "data": {},
        }
    )
    entry = dict(_agent_loop_registry[agent_name])
    module, _, name = entry.pop("_target_").rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    return cls(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
        hf_model_type="llama",
        **entry,
    )


async def play(scenario: dict, model: Any, tokenizer: Any, folder: Path) -> dict:
    if "dataset_row" in scenario:  # the row as envgym.integrations.verl.dataset_rows writes it
        env_id, seed = scenario["dataset_row"]
        row = envgym.integrations.verl.dataset_rows(env_id, [seed])[0]
    else:
        row = scenario["row"]
    if "tiny" in scenario:
        server: Any = TinyModelServer(model, tokenizer, scenario["tiny"])
    else:
        server = ScriptedServer(tokenizer, scenario["replies"])
    agent_name = f"envgym_{scenario['name']}" if "envgym" in scenario else row.get("agent_name", "envgym_agent")
    loop = make_loop(agent_name, server, tokenizer, scenario, folder)
    # verl's worker takes agent_name out of the row's fields and passes the rest, raw_prompt among them.
    fields = {k: v for k, v in row.items() if k != "agent_name"} | {"raw_prompt": row["prompt"]}
    try:
        output = await loop.run({"temperature": 0.0}, **fields)
    except EnvgymError as err:  # the test asserts on the error
        return {"error": f"{type(err).__name__}: {err}"}
    mask = output.response_mask
    ids = output.response_ids
    tensors = output.as_dict()  # verl's own conversion to the batch's tensors
    rm = tensors["rm_scores"]
    return {
        "reward_score": output.reward_score,
        "rm_scores_sum": float(rm.sum()),
        "rm_scores_last": float(rm[-1]),
        "num_turns": output.num_turns,
        "extra_fields": output.extra_fields,
        "metrics": output.metrics.model_dump(),
        "calls": len(server.prompts),
        "prompt_text": tokenizer.decode(output.prompt_ids),
        "response_text": tokenizer.decode(ids),
        "model_text": tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 1]),
        "env_text": tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0]),
        "response_len": len(ids),
        "mask_ones": sum(mask),
        "logprobs_len": None if output.response_logprobs is None else len(output.response_logprobs),
        "second_prompt_text": tokenizer.decode(server.prompts[1]) if len(server.prompts) > 1 else None,
        "replies": getattr(server, "replies", None) if "tiny" in scenario else scenario["replies"],
        "row": row,
    }


def main() -> int:
    request = json.load(sys.stdin)
    model, tokenizer = models.tiny_causal_lm(seed=0)
    with tempfile.TemporaryDirectory() as folder:
        results = {s["name"]: asyncio.run(play(s, model, tokenizer, Path(folder))) for s in request["scenarios"]}
    json.dump({"standins": STANDINS, "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
