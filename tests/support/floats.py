"""Float comparisons whose tolerance follows from the working precision and the values' magnitude.

Two float computations of one quantity along different paths (another batch shape or padding, a
KV cache, another kernel, another CPU's vector width or BLAS, another summation order) agree only
up to rounding: some units of the working dtype's machine epsilon, *relative to the magnitude of
the numbers involved*. A fixed absolute tolerance such as ``atol=1e-6`` is not that: for float32
values of magnitude 10 it is below one ulp (1.2e-7 * 10), so it holds on one CPU and fails on the
next. Hence :func:`assert_close_scaled`::

    |actual - expected| <= ulps * eps(dtype) * scale        (every element)

with ``scale`` the largest magnitude on either side unless the caller knows a better one (the
rounding of a sum is relative to its largest terms, not to each small result). Budgets used here,
in float32 ulps (eps32 = 2**-23 = 1.2e-7), each far above what reordering does and far below
what a real bug (a padding leak, an off-by-one position, a wrong temperature) does, which moves
values by a sizeable fraction of themselves:

* :data:`FEW_OPS` (64 ulps, 7.6e-6 relative): a handful of element-wise operations and short
  sums on small tensors. Vectorised and scalar exp/log differ by an ulp, short sums reorder; the
  budget also covers hand-computed expected constants written with 6 or more significant digits.
* :data:`ONE_PASS` (1024 ulps, 1.2e-4 relative): one forward or backward pass of a model, computed
  in two ways (log-probs relative to the logits' magnitude, gradients relative to each tensor's
  largest entry). Measured with the AVX-512, AVX2 and SSE kernels of torch and MKL (forced with
  ``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``): at most 8 ulps
  for log-probs and 65 for the tiny model's gradients, which sum over every token of the batch.

Weights after optimizer steps are no place for a tolerance: Adam divides each gradient entry by
its own RMS, so the rounding of entries that nearly cancel comes out as steps of the learning
rate's size. Compare the gradients, or arrange for exactness.

Exact comparisons (``==``, ``torch.equal``) stay the rule where exactness holds by construction:
values copied rather than recomputed, integer-valued or dyadic floats, and the same float
operations on the same inputs in the same order (pure-Python float64 rewards, a resumed run
replaying the same kernels on the same machine).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["EPS32", "EPS64", "FEW_OPS", "ONE_PASS", "assert_close_scaled", "eps"]

EPS32 = 2.0**-23  #: float32 machine epsilon (1.19e-7)
EPS64 = 2.0**-52  #: float64 machine epsilon (2.22e-16)
FEW_OPS = 64  #: ulps: a few element-wise operations or short sums on small tensors, or a 6-digit constant
ONE_PASS = 1024  #: ulps: one forward or backward pass of a model computed in two ways

_EPS = {"float64": EPS64, "double": EPS64, "float": EPS64, "float32": EPS32, "bfloat16": 2.0**-7, "float16": 2.0**-10}


def eps(dtype: Any) -> float:
    """Machine epsilon of ``dtype``: a torch or numpy float dtype, its name, or ``float`` (float64)."""
    name = dtype.__name__ if isinstance(dtype, type) else str(dtype)
    name = name.removeprefix("torch.")
    if name not in _EPS:
        raise ValueError(f"not a float dtype: {dtype!r}")
    return _EPS[name]


def _float64(values: Any) -> np.ndarray:
    """``values`` (a tensor, array, number or nested sequence) as a flat float64 array."""
    if hasattr(values, "detach"):  # a torch tensor
        values = values.detach().cpu().double().numpy()
    return np.asarray(values, dtype=np.float64).ravel()


def assert_close_scaled(
    actual: Any, expected: Any, *, dtype: Any, ulps: float, scale: float | None = None, msg: str = ""
) -> None:
    """Assert ``|actual - expected| <= ulps * eps(dtype) * scale`` for every element.

    Args:
        actual, expected: tensors, arrays, numbers or (nested) sequences of numbers, same size.
            The difference is taken in float64, so it adds no rounding of its own.
        dtype: the precision the values were computed in (e.g. ``torch.float32``), whatever
            type holds them now (Python floats read from a float32 tensor are float32 results).
        ulps: the rounding budget in units of ``eps(dtype)``; see the module docstring.
        scale: the magnitude the rounding is relative to; by default the largest ``|value|`` on
            either side (all zeros: the values must match exactly).
        msg: context for the failure message.
    """
    rel = ulps * eps(dtype)
    if not 0 <= rel < 1e-2:
        raise ValueError(f"a relative tolerance of {rel:g} could not catch a real error")
    a, e = _float64(actual), _float64(expected)
    prefix = f"{msg}: " if msg else ""
    assert a.size == e.size, f"{prefix}{a.size} values against {e.size}"
    assert np.isfinite(a).all() and np.isfinite(e).all(), f"{prefix}non-finite values"
    if a.size == 0:
        return
    diffs = np.abs(a - e)
    where = int(diffs.argmax())
    if scale is None:
        scale = float(max(np.abs(a).max(), np.abs(e).max()))
    tolerance = rel * scale
    assert diffs[where] <= tolerance, (
        f"{prefix}|actual - expected| reaches {diffs[where]:.3g} at flat index {where} ({float(a[where])!r} vs "
        f"{float(e[where])!r}): over {tolerance:.3g} = {ulps} ulps of {dtype} x scale {scale:.3g}"
    )
