"""Screenshots of a run: the frames of ``rgb_array`` envs saved as PNG files in the run folder.

A run with a folder (``envgym run --out DIR``) asks its pool for each env's ``render()`` after
every reset and step (:attr:`~envgym.rollout.pools.StepRequest.want_frame`); envs made with
``render_mode="rgb_array"`` answer with an ``H x W x 3`` uint8 array, others with nothing. Each
frame is written to ``DIR/screenshots/<episode_id>/<k>.png``, the screen the agent saw before its
``k``-th action (0-based; ``k = number of turns`` is the screen after the last step), and the
turn record keeps the path relative to ``DIR`` (:attr:`~envgym.rollout.records.Turn.screenshot`),
never the image itself. :func:`encode_png` writes the PNG with the standard library alone (zlib),
so recording needs no optional dependency.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SCREENSHOTS_DIR", "encode_png", "save_screenshot", "screenshot_path"]

#: The folder of a run folder that holds the screenshots.
SCREENSHOTS_DIR = "screenshots"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(frame: Any, *, level: int = 6) -> bytes:
    """An ``H x W x 3`` uint8 array as PNG bytes (8-bit RGB, no filter, zlib ``level``).

    Raises ``ValueError`` for anything else (another shape or dtype, an empty image).
    """
    array = np.asarray(frame)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] != 3 or 0 in array.shape:
        raise ValueError(f"a screenshot must be a non-empty H x W x 3 uint8 array, got {array.dtype} {array.shape}.")
    height, width = array.shape[:2]
    rows = np.empty((height, 1 + 3 * width), np.uint8)
    rows[:, 0] = 0  # filter type 0 (none) on every scanline
    rows[:, 1:] = array.reshape(height, 3 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, truecolour, no interlace
    return (
        _PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), level))
        + _chunk(b"IEND", b"")
    )


def screenshot_path(episode_id: str, index: int) -> str:
    """The path, relative to the run folder, of episode ``episode_id``'s ``index``-th screen."""
    return f"{SCREENSHOTS_DIR}/{episode_id}/{index}.png"


def save_screenshot(root: str | os.PathLike[str], episode_id: str, index: int, frame: Any) -> str | None:
    """Write ``frame`` (``H x W x 3`` uint8) as a PNG under ``root`` (whole, or not at all: a
    partial file is renamed into place); return its path relative to ``root`` (``None`` for no frame)."""
    if frame is None:
        return None
    data = encode_png(frame)
    relative = screenshot_path(episode_id, index)
    target = Path(root) / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".png.part")
    partial.write_bytes(data)
    os.replace(partial, target)
    return relative
