"""The JSON codec of ``envgym serve``: observations, actions, infos and spaces as JSON values.

One module, pure functions, shared by the server (:mod:`envgym.serve`) and its client
(:mod:`envgym.remote`); docs/serving.md is the protocol it implements.

- Values (:func:`encode_obs` / :func:`decode_obs`, and the same for actions): text stays a
  ``str``; a NumPy array becomes ``{"__ndarray__": "<base64>", "dtype": "uint8", "shape": [...]}``
  (bytes exact, ``inf``/``nan`` included); NumPy scalars become Python numbers; a non-finite
  Python float becomes ``{"__float__": "nan"}``; dicts, tuples and lists recurse (tuples travel as
  lists and come back as tuples where the space says so). Anything else is refused
  (:class:`CodecError`), so a value never changes silently on the way.
- Infos (:func:`encode_info` / :func:`decode_info`): the same, except that what JSON cannot hold
  becomes its ``repr`` instead of an error (an info is for reading, never fed back to the env).
- Spaces (:func:`encode_space` / :func:`decode_space`): the Gymnasium spaces envgym envs use,
  rebuilt equal (type, dtype, bounds, charset, lengths). Seeds do not travel.
"""

from __future__ import annotations

import base64
import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from envgym.errors import EnvgymError
from envgym.spaces import Text as EnvgymText

__all__ = [
    "CodecError",
    "decode_action",
    "decode_info",
    "decode_obs",
    "decode_space",
    "encode_action",
    "encode_info",
    "encode_obs",
    "encode_space",
]

#: Dtype kinds an array may have on the wire: bool, ints, unsigned ints, floats, complex.
_ARRAY_KINDS = frozenset("biufc")
_ARRAY_KEYS = frozenset({"__ndarray__", "dtype", "shape"})
_FLOAT_KEY = "__float__"
_RESERVED = frozenset({"__ndarray__", _FLOAT_KEY})


class CodecError(EnvgymError, ValueError):
    """A value or a space that the wire format cannot carry (or a malformed encoded one)."""


# -- values -------------------------------------------------------------------------------------------
def _encode_array(array: np.ndarray) -> dict[str, Any]:
    if array.dtype.kind not in _ARRAY_KINDS:
        raise CodecError(
            f"cannot send a NumPy array of dtype {array.dtype} (expected bool, int, uint, float or complex)."
        )
    data = np.ascontiguousarray(array)
    return {
        "__ndarray__": base64.b64encode(data.tobytes()).decode("ascii"),
        "dtype": data.dtype.str,
        "shape": list(data.shape),
    }


def _encode(value: Any, *, lenient: bool) -> Any:
    kind = type(value)
    if kind is str or kind is bool or kind is int or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else {_FLOAT_KEY: str(value)}
    if kind is dict or isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                if not lenient:
                    raise CodecError(f"cannot send a dict key {key!r} of type {type(key).__name__}: keys must be str.")
                key = str(key.value if isinstance(key, enum.Enum) else key)
            if key in _RESERVED and not lenient:
                raise CodecError(f"cannot send a dict with the key {key!r}: the codec reserves it.")
            out[key] = _encode(item, lenient=lenient)
        return out
    if kind is list or kind is tuple:
        return [_encode(item, lenient=lenient) for item in value]
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ARRAY_KINDS and lenient:
            return _encode(value.tolist(), lenient=True)
        return _encode_array(value)
    if isinstance(value, np.generic):
        return _encode(value.item(), lenient=lenient)
    if isinstance(value, enum.Enum):
        return _encode(value.value, lenient=lenient)
    if isinstance(value, (str, bool, int)):  # subclasses (a StrEnum is caught above)
        return str(value) if isinstance(value, str) else int(value)
    if isinstance(value, float):
        return _encode(float(value), lenient=lenient)
    if isinstance(value, (list, tuple)):
        return [_encode(item, lenient=lenient) for item in value]
    if lenient:
        if isinstance(value, (set, frozenset)):
            return [_encode(item, lenient=True) for item in sorted(value, key=repr)]
        return repr(value)
    raise CodecError(
        f"cannot send a value of type {type(value).__name__} ({value!r:.80}): expected str, number, bool, None, "
        "a NumPy array, or a dict/list/tuple of those."
    )


def _decode_array(value: Mapping[str, Any]) -> np.ndarray:
    try:
        dtype = np.dtype(value["dtype"])
        shape = tuple(int(n) for n in value["shape"])
        data = base64.b64decode(value["__ndarray__"], validate=True)
    except (TypeError, ValueError) as err:
        raise CodecError(f"malformed encoded array {_short(value)}: {err}") from err
    if dtype.kind not in _ARRAY_KINDS:
        raise CodecError(f"an encoded array must have a numeric or bool dtype, got {dtype}.")
    if any(n < 0 for n in shape) or math.prod(shape) * dtype.itemsize != len(data):
        raise CodecError(f"an encoded array of {len(data)} bytes does not fit shape {list(shape)} and dtype {dtype}.")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _decode(value: Any, space: spaces.Space[Any] | None) -> Any:
    kind = type(value)
    if kind is str or kind is bool or kind is int or kind is float or value is None:
        if space is not None and isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
            return _as_array(value, space)
        return value
    if kind is dict:
        if value.keys() == _ARRAY_KEYS:
            array = _decode_array(value)
            return _as_array(array, space) if space is not None else array
        if len(value) == 1 and _FLOAT_KEY in value:
            text = value[_FLOAT_KEY]
            if text not in ("nan", "inf", "-inf"):
                raise CodecError(f"an encoded float must be 'nan', 'inf' or '-inf', got {_short(text)}.")
            return float(text)
        if isinstance(space, spaces.Dict):
            missing = set(space.spaces) - set(value)
            extra = set(value) - set(space.spaces)
            if missing or extra:
                raise CodecError(
                    f"expected a dict with the keys {sorted(space.spaces)}, got {sorted(value)}"
                    + (f" (missing {sorted(missing)})" if missing else "")
                    + (f" (unknown {sorted(extra)})" if extra else "")
                    + "."
                )
            return {key: _decode(value[key], sub) for key, sub in space.spaces.items()}
        return {key: _decode(item, None) for key, item in value.items()}
    if kind is list:
        if space is None or isinstance(space, (EnvgymText, spaces.Text)):
            return [_decode(item, None) for item in value]
        if isinstance(space, spaces.Tuple):
            if len(value) != len(space.spaces):
                raise CodecError(f"expected a list of {len(space.spaces)} values for {space}, got {len(value)}.")
            return tuple(_decode(item, sub) for item, sub in zip(value, space.spaces, strict=True))
        if isinstance(space, spaces.Sequence):
            items = tuple(_decode(item, space.feature_space) for item in value)
            return np.stack(items) if space.stack and items else items
        if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
            return _as_array(value, space)
        raise CodecError(f"expected a value of {space}, got a list {_short(value)}.")
    raise CodecError(f"cannot decode a value of type {kind.__name__}: {_short(value)}.")


def _as_array(value: Any, space: spaces.Space[Any] | None) -> Any:
    if space is None or not isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return value
    try:
        array = np.asarray(value, dtype=space.dtype)
    except (TypeError, ValueError, OverflowError) as err:
        raise CodecError(f"expected an array of {space}, got {_short(value)}: {err}") from err
    if array.shape != space.shape:
        raise CodecError(f"expected an array of shape {list(space.shape)} for {space}, got shape {list(array.shape)}.")
    return array


def encode_obs(obs: Any) -> Any:
    """``obs`` as a JSON value (see the module docstring). Raises :class:`CodecError` on a value
    the wire cannot carry exactly."""
    if type(obs) is str:  # the hot path of text envs
        return obs
    return _encode(obs, lenient=False)


def decode_obs(value: Any, space: spaces.Space[Any] | None = None) -> Any:
    """An observation back from its JSON value; with ``space``, lists become the tuples or arrays
    the space holds and a dict must have the space's keys. Raises :class:`CodecError` on a
    malformed value."""
    if type(value) is str:
        return value
    return _decode(value, space)


def encode_action(action: Any) -> Any:
    """An action as a JSON value (the same encoding as observations)."""
    return encode_obs(action)


def decode_action(value: Any, space: spaces.Space[Any]) -> Any:
    """An action back from its JSON value, shaped for ``space`` (a list to an array for a ``Box``,
    an int for ``Discrete``). A text space takes the value as it came: a malformed text action is
    the env's to judge (an invalid step), never a decoding error.

    Raises:
        CodecError: the value cannot be an action of ``space`` (wrong type, shape or keys).
    """
    if isinstance(space, (EnvgymText, spaces.Text)):
        return value if type(value) is str else _decode(value, None)
    if isinstance(space, spaces.Discrete):
        decoded = _decode(value, None)
        if isinstance(decoded, np.ndarray) and decoded.shape == () and decoded.dtype.kind in "iu":
            decoded = decoded.item()
        if type(decoded) is not int:
            raise CodecError(f"expected an integer action for {space}, got {_short(value)}.")
        return decoded
    return _decode(value, space)


def encode_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """``info`` as a JSON object: arrays and non-finite floats encoded as for observations,
    enums as their values, anything else JSON cannot hold as its ``repr``."""
    return _encode(info, lenient=True)


def decode_info(value: Mapping[str, Any]) -> dict[str, Any]:
    """An info back from :func:`encode_info` (arrays and non-finite floats restored)."""
    if not isinstance(value, dict):
        raise CodecError(f"an info must be a JSON object, got {_short(value)}.")
    return _decode(value, None)


# -- spaces -------------------------------------------------------------------------------------------
def _array_field(array: np.ndarray) -> dict[str, Any]:
    return _encode_array(np.asarray(array))


def encode_space(space: spaces.Space[Any]) -> dict[str, Any]:
    """``space`` as a JSON object that :func:`decode_space` rebuilds equal.

    Raises:
        CodecError: a space type the wire does not carry (``Graph``, ``OneOf``, or a custom
            subclass whose extra state would be lost).
    """
    kind = type(space)
    if kind is EnvgymText:
        return {
            "type": "envgym.Text",
            "min_length": space.min_length,
            "max_length": space.max_length,
            "sample_max_length": space.sample_max_length,
        }
    if kind is spaces.Text:
        return {
            "type": "Text",
            "min_length": space.min_length,
            "max_length": space.max_length,
            "charset": "".join(sorted(space.character_set)),
        }
    if kind is spaces.Discrete:
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start), "dtype": space.dtype.str}
    if kind is spaces.Box:
        return {
            "type": "Box",
            "low": _array_field(space.low),
            "high": _array_field(space.high),
            "shape": list(space.shape),
            "dtype": space.dtype.str,
        }
    if kind is spaces.MultiDiscrete:
        return {
            "type": "MultiDiscrete",
            "nvec": _array_field(space.nvec),
            "start": _array_field(space.start),
            "dtype": space.dtype.str,
        }
    if kind is spaces.MultiBinary:
        n = space.n
        return {"type": "MultiBinary", "n": [int(x) for x in n] if isinstance(n, (list, tuple, np.ndarray)) else int(n)}
    if kind is spaces.Dict:
        return {"type": "Dict", "spaces": [[key, encode_space(sub)] for key, sub in space.spaces.items()]}
    if kind is spaces.Tuple:
        return {"type": "Tuple", "spaces": [encode_space(sub) for sub in space.spaces]}
    if kind is spaces.Sequence:
        return {"type": "Sequence", "space": encode_space(space.feature_space), "stack": bool(space.stack)}
    raise CodecError(
        f"cannot send a space of type {kind.__module__}.{kind.__qualname__} ({space}): the wire carries "
        "envgym.spaces.Text and Gymnasium's Text, Discrete, Box, MultiDiscrete, MultiBinary, Dict, Tuple and Sequence."
    )


def decode_space(value: Mapping[str, Any]) -> spaces.Space[Any]:
    """A space back from :func:`encode_space`.

    Raises:
        CodecError: an unknown space type or a malformed field (the message says which).
    """
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        raise CodecError(f"an encoded space must be an object with a 'type', got {_short(value)}.")
    kind = value["type"]
    try:
        if kind == "envgym.Text":
            return EnvgymText(
                int(value["max_length"]),
                min_length=int(value["min_length"]),
                sample_max_length=int(value["sample_max_length"]),
            )
        if kind == "Text":
            return spaces.Text(
                int(value["max_length"]), min_length=int(value["min_length"]), charset=str(value["charset"])
            )
        if kind == "Discrete":
            return spaces.Discrete(int(value["n"]), start=int(value["start"]), dtype=np.dtype(value["dtype"]))
        if kind == "Box":
            return spaces.Box(
                _decode_array(value["low"]),
                _decode_array(value["high"]),
                shape=tuple(int(n) for n in value["shape"]),
                dtype=np.dtype(value["dtype"]),
            )
        if kind == "MultiDiscrete":
            return spaces.MultiDiscrete(
                _decode_array(value["nvec"]), dtype=np.dtype(value["dtype"]), start=_decode_array(value["start"])
            )
        if kind == "MultiBinary":
            n = value["n"]
            return spaces.MultiBinary([int(x) for x in n] if isinstance(n, list) else int(n))
        if kind == "Dict":
            return spaces.Dict([(str(key), decode_space(sub)) for key, sub in value["spaces"]])
        if kind == "Tuple":
            return spaces.Tuple([decode_space(sub) for sub in value["spaces"]])
        if kind == "Sequence":
            return spaces.Sequence(decode_space(value["space"]), stack=bool(value["stack"]))
    except CodecError:
        raise
    except (KeyError, TypeError, ValueError, AssertionError) as err:
        raise CodecError(f"malformed encoded {kind} space {_short(value)}: {err!r}") from err
    raise CodecError(
        f"unknown space type {kind!r}: expected one of envgym.Text, Text, Discrete, Box, MultiDiscrete, "
        "MultiBinary, Dict, Tuple, Sequence."
    )
