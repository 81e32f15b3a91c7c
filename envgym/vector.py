"""Vector environments' infos, one dict per sub-environment.

``gym.make_vec("envgym/...", num_envs=n)`` (or a ``SyncVectorEnv`` / ``AsyncVectorEnv``) returns
Gymnasium's batched infos: each key maps to an array of ``n`` values, beside a boolean mask
``"_key"`` saying which sub-environments gave that key; a nested dict (``info["task"]``,
``info["reward_components"]``) is batched the same way, one level down. Text agents want the
opposite: ``info["admissible_actions"]`` of env 2, ``info["task"]["id"]`` of env 0.
:func:`split_infos` turns the batch back into ``n`` plain dicts:

>>> envs = gym.make_vec("envgym/Sokoban-v0", num_envs=2)  # doctest: +SKIP
>>> obs, infos = envs.reset(seed=0)                        # doctest: +SKIP
>>> split_infos(infos, envs.num_envs)[1]["task"]["id"]      # doctest: +SKIP
'sokoban-...'

Only the keys a sub-environment gave are in its dict (the masks say which); values come back as
the env gave them as far as the batch kept them: numpy scalars become Python numbers, object
arrays give back the original objects (strings, lists, ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["split_infos"]


def _value(item: Any) -> Any:
    """A batched element as the env gave it: numpy scalars as Python numbers, arrays kept as arrays."""
    if isinstance(item, np.generic):
        return item.item()
    return item


def _split(batch: Mapping[str, Any], num_envs: int, where: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, values in batch.items():
        if key.startswith("_") and key[1:] in batch:
            continue  # a mask, read with its key
        mask = batch.get(f"_{key}")
        if mask is None:
            raise ValueError(
                f"{where}[{key!r}] has no mask {f'_{key}'!r}: split_infos expects Gymnasium's vector infos "
                "(from gym.make_vec, SyncVectorEnv or AsyncVectorEnv)."
            )
        mask = np.asarray(mask)
        if mask.shape != (num_envs,):
            raise ValueError(
                f"{where}[{f'_{key}'!r}] has shape {mask.shape}, expected ({num_envs},): is num_envs={num_envs} right?"
            )
        if isinstance(values, Mapping):
            parts = _split(values, num_envs, f"{where}[{key!r}]")
        else:
            if len(values) != num_envs:
                raise ValueError(f"{where}[{key!r}] holds {len(values)} values, expected num_envs={num_envs}.")
            parts = [_value(values[i]) for i in range(num_envs)]
        for i in np.flatnonzero(mask):
            out[i][key] = parts[i]
    return out


def split_infos(infos: Mapping[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """Gymnasium's batched vector ``infos`` as one dict per sub-environment, nested dicts included.

    Args:
        infos: the ``infos`` of a vector env's ``reset`` or ``step``.
        num_envs: how many sub-environments the vector env has (``envs.num_envs``).

    Returns:
        ``num_envs`` dicts; dict ``i`` holds exactly the keys whose ``"_key"`` mask is set at ``i``.

    Raises:
        TypeError: ``infos`` is not a mapping.
        ValueError: ``infos`` is not in Gymnasium's vector layout (a key without its mask), does
            not have ``num_envs`` entries, or ``num_envs`` is not a positive integer.
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive integer (envs.num_envs), got {num_envs!r}.")
    if not isinstance(infos, Mapping):
        raise TypeError(f"infos must be the dict a vector env returned, got {type(infos).__name__}.")
    return _split(infos, num_envs, "infos")
