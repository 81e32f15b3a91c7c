"""Checkpoints: everything a run needs to continue exactly where it stopped.

A checkpoint is a folder ``<run>/checkpoints/update-NNNNNN/`` holding

* ``model/`` (full fine-tuning: a transformers model folder with its tokenizer, loadable by
  ``envgym run --agent hf:<folder>``) or ``adapter/`` (LoRA: a peft adapter folder);
* ``value_head.safetensors`` (PPO);
* ``optimizer.pt``: the optimizer state and the torch RNG states (CPU and CUDA);
* ``state.json``: the update counter, the next task seed, the curricula's state, the task pool
  (its place in the order and the dropped tasks) and the task filter's counts, the Python RNG
  state and the resolved config;
* ``COMPLETE``: written last. A folder without it (a crash while saving) is ignored and removed.

The folder is written under a temporary name, flushed to disk and renamed into place, and only
the newest ``keep`` checkpoints stay on disk (an old one is renamed away before it is deleted):
a run killed at any instant resumes from its newest whole checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envgym._runfiles import fsync_folder, write_atomic
from envgym.errors import ConfigError
from envgym.rollout.records import json_safe

__all__ = [
    "CHECKPOINTS_DIR",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "remove_stale_checkpoints",
    "save_checkpoint",
]

log = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
COMPLETE = "COMPLETE"
STATE_FILE = "state.json"
OPTIMIZER_FILE = "optimizer.pt"
_NAME = re.compile(r"^update-(\d{6,})$")


def _name(update: int) -> str:
    return f"update-{update:06d}"


def list_checkpoints(run: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """Complete checkpoints of run folder ``run`` as ``(update, folder)``, oldest first."""
    root = Path(run) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        match = _NAME.match(folder.name)
        if match and (folder / COMPLETE).is_file():
            found.append((int(match[1]), folder))
    return sorted(found)


def latest_checkpoint(run: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint of ``run``, or ``None``."""
    found = list_checkpoints(run)
    return found[-1][1] if found else None


def _sync_tree(folder: Path) -> None:
    """fsync every file under ``folder`` (the model files come from libraries that do not)."""
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                os.fsync(f.fileno())


def _retire(folder: Path) -> None:
    """Remove the checkpoint ``folder``: first renamed out of the ``update-NNNNNN`` names (one
    atomic step), then deleted. A kill during a plain ``rmtree`` could leave a half-deleted folder
    that still has its ``COMPLETE`` marker, which a resume would take for a good checkpoint."""
    doomed = folder.with_name(f".{folder.name}.retired.tmp")
    shutil.rmtree(doomed, ignore_errors=True)
    os.replace(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def save_checkpoint(
    run: str | os.PathLike[str],
    update: int,
    *,
    policy: Any,
    optimizer: Any,
    state: Mapping[str, Any],
    keep: int,
) -> Path:
    """Write the checkpoint of ``update`` (see the module docstring) and prune old ones.

    ``state`` is the JSON part (update counter, seeds, curricula, config); the RNG states are
    added here.
    """
    import torch

    root = Path(run) / CHECKPOINTS_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = root / _name(update)
    work = root / f".{_name(update)}.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    policy.save(work)
    rng: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save({"optimizer": optimizer.state_dict(), "rng": rng}, work / OPTIMIZER_FILE)
    version, internal, gauss = random.getstate()
    document = {**json_safe(dict(state)), "update": int(update), "python_rng": [version, list(internal), gauss]}
    write_atomic(work / STATE_FILE, json.dumps(document, indent=2, sort_keys=True) + "\n")
    _sync_tree(work)  # every file on disk before the marker says the checkpoint is whole
    write_atomic(work / COMPLETE, "")
    if final.exists():  # the same update saved again: move the old one aside whole, never delete it in place
        _retire(final)
    os.replace(work, final)
    fsync_folder(root)
    for _, old in list_checkpoints(run)[:-keep]:
        _retire(old)
    remove_stale_checkpoints(run)
    log.info("checkpoint written: %s", final)
    return final


def remove_stale_checkpoints(run: str | os.PathLike[str]) -> None:
    """Delete the temporary folders (``.update-*.tmp``) a crash left while a checkpoint was saved
    or an old one retired. Only the run's writer may call it (it holds the folder's lock): a resume
    that finds the run already finished saves nothing, and would otherwise leave them."""
    root = Path(run) / CHECKPOINTS_DIR
    for stale in root.glob(".update-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)


def load_checkpoint(folder: str | os.PathLike[str], *, policy: Any, optimizer: Any) -> dict[str, Any]:
    """Restore the policy's weights, the optimizer and the RNG states from ``folder``; return the
    JSON state (``update``, ``next_seed``, curricula...)."""
    import torch

    path = Path(folder)
    if not (path / COMPLETE).is_file():
        raise ConfigError(f"{path} is not a complete checkpoint (no {COMPLETE} marker); pick another one.")
    try:
        state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path / STATE_FILE} cannot be read ({err}); the checkpoint is damaged.") from err
    policy.load(path)
    saved = torch.load(path / OPTIMIZER_FILE, map_location="cpu", weights_only=True)
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["rng"]["torch"])
    if "cuda" in saved["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["rng"]["cuda"])
    version, internal, gauss = state.pop("python_rng")
    random.setstate((version, tuple(internal), gauss))
    return state
