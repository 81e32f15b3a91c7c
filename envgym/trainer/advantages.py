"""Advantage estimators: group-relative (GRPO, Dr. GRPO, RLOO, GDPO, GiGPO) and turn-level GAE.

Every function is a small piece of arithmetic on 1-D tensors, with its formula in the docstring.
Episode-level estimators take one scalar per trajectory (``rewards[N]``) and the group of each
trajectory (``group_ids[N]``: trajectories of one group share a task, so their rewards are
compared with each other). Turn-level estimators take one value per turn of one episode.

Which standard deviation. Group statistics use the *population* standard deviation
(``sqrt(sum((r - mean)**2) / K)``, divide by ``K``), not the sample one (divide by ``K - 1``,
which TRL and verl use through ``torch.std``). With it, the normalised advantages of every group
whose rewards are not all equal have mean 0 and mean square exactly 1, whatever its size, so groups
that lost members (failed episodes are left out of the batch) keep the same scale as full ones;
the sample std would shrink a group of ``K`` by ``sqrt((K - 1) / K)``, most for the smallest
groups. A group of one member has std 0 under both. Pass ``unbiased=True`` to get TRL's numbers.

Every output is finite: a group of one member, or whose rewards are all equal, gets advantage 0;
NaN or infinite inputs raise :class:`ValueError` naming the first bad position.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from envgym.errors import ConfigError, MissingDependencyError, suggest

try:
    import torch
except ImportError as err:  # pragma: no cover - torch ships with the llm extra
    raise MissingDependencyError("torch", "llm", "envgym.trainer.advantages") from err

__all__ = [
    "combine_episode_and_step",
    "discounted_returns",
    "gae",
    "gdpo_advantages",
    "gigpo_step_advantages",
    "group_stats",
    "grpo_advantages",
    "rloo_advantages",
    "zero_variance_groups",
]


# ---------------------------------------------------------------------------------- input checks
def _as_values(values: Any, name: str) -> torch.Tensor:
    """``values`` as a finite 1-D floating tensor (integers and lists become float32)."""
    try:
        tensor = torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a 1-D tensor (or list) of numbers, got {values!r}.") from err
    if tensor.dim() != 1:
        raise ValueError(f"{name} must be 1-D (one value per item), got shape {tuple(tensor.shape)}.")
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise ValueError(f"{name} must hold real numbers, got dtype {tensor.dtype}.")
    if not tensor.is_floating_point():
        tensor = tensor.to(torch.float32)
    bad = ~torch.isfinite(tensor)
    if bool(bad.any()):
        index = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"{name} must be finite numbers, got {float(tensor[index])!r} at position {index}; "
            "fix the reward (or value) that produced it before computing advantages."
        )
    return tensor


def _as_groups(group_ids: Any, n: int, device: torch.device) -> torch.Tensor:
    """``group_ids`` as a 1-D int64 tensor of length ``n`` on ``device``."""
    try:
        ids = torch.as_tensor(group_ids, device=device)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"group_ids must be a 1-D tensor (or list) of integers, got {group_ids!r}.") from err
    if ids.dim() != 1 or ids.numel() != n:
        raise ValueError(f"group_ids must give one group per item: expected shape ({n},), got {tuple(ids.shape)}.")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be integers (one id per group), got dtype {ids.dtype}.")
    return ids.to(torch.int64)


def _check_eps(eps: float) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ConfigError(f"eps must be a number >= 0 (added to the std to avoid division by 0), got {eps!r}.")
    return float(eps)


def _check_unit(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be a number in [0, 1], got {value!r}.")
    return float(value)


# ---------------------------------------------------------------------------------- group-relative
def group_stats(
    values: Any, group_ids: Any, *, unbiased: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean, standard deviation and size of each item's group, broadcast back to the items.

    For item ``i`` in group ``g`` with members ``G``::

        mean_i  = sum_{j in G} v_j / |G|
        std_i   = sqrt(sum_{j in G} (v_j - mean_i)**2 / d),   d = |G|  (or |G| - 1 if unbiased)
        count_i = |G|

    Computed in two passes (mean first, then squared deviations) on values shifted by their group
    minimum, which stays exact for large, nearly equal values and makes a group of equal values
    come out with its value as the mean and std exactly 0 (a plain ``sum / K`` of seven 0.1s is
    not 0.1 in float32, which would give that group advantages of +-1 instead of 0). A group of
    one member has std 0 (also when ``unbiased``).

    Args:
        values: ``[N]`` numbers.
        group_ids: ``[N]`` integer group of each item (any integers; they need not be contiguous).
        unbiased: divide by ``|G| - 1`` (sample std) instead of ``|G|`` (population std).

    Returns:
        ``(mean[N], std[N], count[N])``; ``count`` is int64, the others have ``values``' dtype.
    """
    v = _as_values(values, "values")
    ids = _as_groups(group_ids, v.numel(), v.device)
    if v.numel() == 0:
        return v.clone(), v.clone(), torch.zeros(0, dtype=torch.int64, device=v.device)
    _, inverse = torch.unique(ids, return_inverse=True)
    n_groups = int(inverse.max()) + 1
    counts = torch.zeros(n_groups, dtype=torch.int64, device=v.device).index_add_(0, inverse, torch.ones_like(inverse))
    lows = torch.full((n_groups,), torch.inf, dtype=v.dtype, device=v.device).scatter_reduce(
        0, inverse, v, reduce="amin"
    )
    shifted = torch.zeros(n_groups, dtype=v.dtype, device=v.device).index_add_(0, inverse, v - lows[inverse])
    means = lows + shifted / counts.to(v.dtype)
    deviation = v - means[inverse]
    squares = torch.zeros(n_groups, dtype=v.dtype, device=v.device).index_add_(0, inverse, deviation * deviation)
    divisor = (counts - 1 if unbiased else counts).clamp_min(1).to(v.dtype)
    stds = torch.sqrt(squares / divisor)
    return means[inverse], stds[inverse], counts[inverse]


def grpo_advantages(
    rewards: Any, group_ids: Any, *, normalize_std: bool = True, eps: float = 1e-6, unbiased: bool = False
) -> torch.Tensor:
    """GRPO advantages: each reward relative to its group.

    ::

        A_i = (r_i - mean_g) / (std_g + eps)     normalize_std=True  (GRPO)
        A_i =  r_i - mean_g                      normalize_std=False (Dr. GRPO: no std division)

    ``std_g`` is the population std of the group (see the module docstring; ``unbiased=True`` for
    the sample std). A group of one member gets 0, and so does a group whose rewards are all equal
    (``0 / (0 + eps)``), so ``eps`` may be 0.

    Returns:
        ``[N]`` advantages; they sum to 0 within every group.
    """
    eps = _check_eps(eps)
    r = _as_values(rewards, "rewards")
    mean, std, count = group_stats(r, group_ids, unbiased=unbiased)
    centred = r - mean
    if normalize_std:
        denominator = std + eps
        centred = torch.where(denominator > 0, centred / torch.where(denominator > 0, denominator, 1.0), 0.0)
    return torch.where(count > 1, centred, torch.zeros_like(centred))


def rloo_advantages(rewards: Any, group_ids: Any) -> torch.Tensor:
    """REINFORCE leave-one-out advantages: each reward minus the mean of the *other* members.

    ::

        A_i = r_i - (sum_{j in G, j != i} r_j) / (K - 1)  =  K / (K - 1) * (r_i - mean_G),   K = |G|

    A group of one member has no other member to compare with, so it gets 0.
    """
    r = _as_values(rewards, "rewards")
    mean, _, count = group_stats(r, group_ids)
    k = count.to(r.dtype)
    # the right-hand form: a group of equal rewards gives exactly 0
    return torch.where(count > 1, k / (k - 1).clamp_min(1) * (r - mean), torch.zeros_like(r))


def gdpo_advantages(
    components: Mapping[str, Any],
    group_ids: Any,
    *,
    weights: Mapping[str, float] | None = None,
    normalize_std: bool = True,
    batch_normalize: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GDPO-style advantages: every reward component normalised within its group on its own.

    ::

        a_i^c = grpo_advantages(r^c, group_ids)_i          for each component c
        s_i   = sum_c w_c * a_i^c                           (w_c = 1 unless weights says)
        A_i   = (s_i - mean(s)) / (std(s) + eps)            over the whole batch (batch_normalize)

    Normalising the summed reward instead maps different component combinations to the same
    advantage (in a group of two, ``(1, 0)`` vs ``(0, 0)`` and ``(1, 1)`` vs ``(0, 0)`` both give
    ``[+1, -1]``); normalising each component keeps them apart (``[+1, -1]`` vs ``[+2, -2]``). The
    batch step keeps the scale from growing with the number of components. Batch statistics use
    the population std over all ``N`` items; a batch of one item gets 0.

    Args:
        components: reward component name -> ``[N]`` values (one per trajectory).
        group_ids: ``[N]`` group of each trajectory.
        weights: component name -> weight; ``None`` weighs every component 1. When given it must
            name every component, and nothing else.
        normalize_std: divide by the group std in the per-component step (False: Dr. GRPO style).
        batch_normalize: whiten the weighted sum over the batch.
        eps: added to every std.
    """
    eps = _check_eps(eps)
    if not isinstance(components, Mapping) or not components:
        raise ConfigError(
            f"components must be a non-empty mapping of reward component name -> [N] values, got {components!r}."
        )
    names = list(components)
    if weights is None:
        weights = {name: 1.0 for name in names}
    elif not isinstance(weights, Mapping):
        raise ConfigError(f"weights must be None or a mapping of component name -> weight, got {weights!r}.")
    for key in weights:
        if key not in components:
            raise ConfigError(
                f"weights names {key!r}, which is not a reward component.{suggest(str(key), names)} "
                f"Components: {', '.join(map(repr, names))}."
            )
    missing = [name for name in names if name not in weights]
    if missing:
        raise ConfigError(
            f"weights must give a weight to every reward component; missing {', '.join(map(repr, missing))}."
        )
    total: torch.Tensor | None = None
    for name in names:
        weight = weights[name]
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise ConfigError(f"weight of component {name!r} must be a number, got {weight!r}.")
        values = _as_values(components[name], f"component {name!r}")
        if total is not None and values.numel() != total.numel():
            raise ValueError(
                f"every component must have one value per trajectory ({total.numel()}); "
                f"component {name!r} has {values.numel()}."
            )
        term = float(weight) * grpo_advantages(values, group_ids, normalize_std=normalize_std, eps=eps)
        total = term if total is None else total + term
    assert total is not None
    if not batch_normalize:
        return total
    if total.numel() < 2:
        return torch.zeros_like(total)
    std = total.std(unbiased=False)
    return (total - total.mean()) / (std + eps) if float(std + eps) > 0 else torch.zeros_like(total)


def zero_variance_groups(rewards: Any, group_ids: Any, *, atol: float = 0.0) -> torch.Tensor:
    """Items whose group carries no learning signal: every reward in the group is equal.

    ::

        flat_i = max_{j in G} r_j - min_{j in G} r_j <= atol

    A group of one member counts as flat. Dynamic sampling (DAPO) drops these groups and rolls out
    fresh ones in their place; their GRPO advantages are all 0.

    Returns:
        ``[N]`` bool tensor, True for items of flat groups.
    """
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not atol >= 0:
        raise ConfigError(f"atol must be a number >= 0, got {atol!r}.")
    r = _as_values(rewards, "rewards")
    ids = _as_groups(group_ids, r.numel(), r.device)
    if r.numel() == 0:
        return torch.zeros(0, dtype=torch.bool, device=r.device)
    _, inverse = torch.unique(ids, return_inverse=True)
    n_groups = int(inverse.max()) + 1
    high = torch.full((n_groups,), -torch.inf, dtype=r.dtype, device=r.device).scatter_reduce(
        0, inverse, r, reduce="amax"
    )
    low = torch.full((n_groups,), torch.inf, dtype=r.dtype, device=r.device).scatter_reduce(
        0, inverse, r, reduce="amin"
    )
    return (high - low)[inverse] <= atol


# ---------------------------------------------------------------------------------- turn-level
def discounted_returns(rewards: Any, gamma: float) -> torch.Tensor:
    """Reward-to-go of every turn of one episode.

    ::

        G_t = r_t + gamma * G_{t+1},    G_T = 0

    Args:
        rewards: ``[T]`` reward of each turn.
        gamma: discount in [0, 1].
    """
    gamma = _check_unit("gamma", gamma)
    r = _as_values(rewards, "rewards")
    out = torch.empty_like(r)
    running = r.new_zeros(())
    for t in range(r.numel() - 1, -1, -1):
        running = r[t] + gamma * running
        out[t] = running
    return out


def gae(
    rewards: Any,
    values: Any,
    *,
    last_value: float = 0.0,
    terminated: bool = True,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the turns of one episode (one value per turn).

    ::

        V_T     = 0 if terminated else last_value     (bootstrap only when truncated)
        delta_t = r_t + gamma * V_{t+1} - V_t
        A_t     = delta_t + gamma * lam * A_{t+1},    A_T = 0
        R_t     = A_t + V_t                           (the value targets)

    With ``lam=1`` the advantages are the discounted returns minus the values; with ``lam=0`` they
    are the one-step TD errors. Inputs are detached: advantages and returns are targets.

    Args:
        rewards: ``[T]`` reward of each turn.
        values: ``[T]`` value estimate of each turn's state.
        last_value: value of the state after the last turn, used when the episode was truncated.
        terminated: True when the episode ended for good (no reward can follow).
        gamma: discount in [0, 1].
        lam: GAE lambda in [0, 1].

    Returns:
        ``(advantages[T], returns[T])``.
    """
    gamma = _check_unit("gamma", gamma)
    lam = _check_unit("lam", lam)
    r = _as_values(torch.as_tensor(rewards).detach(), "rewards")
    v = _as_values(torch.as_tensor(values).detach(), "values").to(device=r.device, dtype=r.dtype)
    if v.numel() != r.numel():
        raise ValueError(f"values must have one entry per turn ({r.numel()}), got {v.numel()}.")
    try:
        bootstrap = float(torch.as_tensor(last_value).detach())
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"last_value must be a number, got {last_value!r}.") from err
    if not math.isfinite(bootstrap):
        raise ValueError(f"last_value must be a finite number, got {last_value!r}.")
    next_value = r.new_tensor(0.0 if terminated else bootstrap)
    advantages = torch.empty_like(r)
    running = r.new_zeros(())
    for t in range(r.numel() - 1, -1, -1):
        delta = r[t] + gamma * next_value - v[t]
        running = delta + gamma * lam * running
        advantages[t] = running
        next_value = v[t]
    return advantages, advantages + v


# ---------------------------------------------------------------------------------- GiGPO
def gigpo_step_advantages(
    step_keys: Sequence[Sequence[Hashable]],
    step_returns: Sequence[Any],
    group_ids: Sequence[int] | Any,
    *,
    normalize_std: bool = True,
    eps: float = 1e-6,
    unbiased: bool = False,
) -> list[torch.Tensor]:
    """GiGPO-style step-level advantages from anchor states.

    Within one episode group (same task), every turn whose state key (e.g. the observation text)
    is identical forms a step group, across episodes and within one episode alike. Each turn's
    step advantage is its discounted return normalised within its step group::

        A^step_{i,t} = (G_{i,t} - mean_S) / (std_S + eps)   S = {(j, u) : group_j = group_i,
                                                                      key_{j,u} = key_{i,t}}

    (without the std division when ``normalize_std=False``). A state visited once in the group
    (a singleton step group) gets 0, as does a step group whose returns are all equal.

    Args:
        step_keys: per episode, the state key of each turn (hashable: strings, tuples, ints).
        step_returns: per episode, ``[T_i]`` discounted return of each turn
            (:func:`discounted_returns`).
        group_ids: the episode group of each episode.

    Returns:
        per episode, ``[T_i]`` step advantages.
    """
    n = len(step_keys)
    if len(step_returns) != n:
        raise ValueError(
            f"step_keys and step_returns must both have one entry per episode; got {n} and {len(step_returns)}."
        )
    groups = _as_groups(group_ids, n, torch.device("cpu")).tolist()
    returns = [
        _as_values(torch.as_tensor(values).detach(), f"step_returns[{i}]") for i, values in enumerate(step_returns)
    ]
    step_group: dict[tuple[int, Hashable], int] = {}
    flat_ids: list[int] = []
    for i, keys in enumerate(step_keys):
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
            raise TypeError(f"step_keys[{i}] must be a sequence with one state key per turn, got {keys!r}.")
        if len(keys) != returns[i].numel():
            raise ValueError(
                f"episode {i} has {len(keys)} step keys but {returns[i].numel()} step returns; "
                "give one key and one return per turn."
            )
        for t, key in enumerate(keys):
            try:
                index = step_group.setdefault((groups[i], key), len(step_group))
            except TypeError as err:
                raise TypeError(
                    f"step key of episode {i}, turn {t} must be hashable (a string, number or tuple), "
                    f"got {type(key).__name__}: {key!r}."
                ) from err
            flat_ids.append(index)
    if not flat_ids:
        return [r.clone() for r in returns]
    device, dtype = returns[0].device, returns[0].dtype
    flat = torch.cat([r.to(device=device, dtype=dtype) for r in returns])
    advantages = grpo_advantages(
        flat, torch.tensor(flat_ids, device=device), normalize_std=normalize_std, eps=eps, unbiased=unbiased
    )
    return list(torch.split(advantages, [r.numel() for r in returns]))


def combine_episode_and_step(
    episode_adv: Any, step_adv: Sequence[Any], *, step_weight: float = 1.0
) -> list[torch.Tensor]:
    """GiGPO's per-turn advantage: the episode advantage on every turn plus the weighted step one.

    ::

        A_{i,t} = A^episode_i + step_weight * A^step_{i,t}
    """
    if isinstance(step_weight, bool) or not isinstance(step_weight, (int, float)) or not math.isfinite(step_weight):
        raise ConfigError(f"step_weight must be a number, got {step_weight!r}.")
    episodes = _as_values(torch.as_tensor(episode_adv).detach(), "episode_adv")
    if len(step_adv) != episodes.numel():
        raise ValueError(
            f"step_adv must have one entry per episode ({episodes.numel()} episode advantages), got {len(step_adv)}."
        )
    out = []
    for i, steps in enumerate(step_adv):
        s = _as_values(torch.as_tensor(steps).detach(), f"step_adv[{i}]").to(device=episodes.device)
        out.append(episodes[i] + float(step_weight) * s)
    return out
