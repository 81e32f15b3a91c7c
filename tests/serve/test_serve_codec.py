"""The serve codec: values, infos and spaces through JSON and back, exactly."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

import envgym
from envgym.core import TerminationReason
from envgym.serve.codec import (
    CodecError,
    decode_action,
    decode_info,
    decode_obs,
    decode_space,
    encode_action,
    encode_info,
    encode_obs,
    encode_space,
)
from envgym.spaces import Text


def _wire(value: Any) -> Any:
    """``value`` through a strict JSON text, as a frame carries it."""
    return json.loads(json.dumps(value, allow_nan=False))


def test_text_stays_a_string() -> None:
    assert encode_obs("#@$ \n") == "#@$ \n"
    assert decode_obs(_wire(encode_obs("héllo"))) == "héllo"


def test_arrays_travel_bit_exact() -> None:
    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    wire = _wire(encode_obs(image))
    assert wire["dtype"] == "|u1" and wire["shape"] == [2, 3, 3]
    back = decode_obs(wire)
    assert back.dtype == np.uint8 and back.shape == (2, 3, 3) and (back == image).all()
    back[0, 0, 0] = 9  # writable, not a view of the frame's bytes
    floats = np.array([1.5, -np.inf, np.nan], dtype=np.float32)
    out = decode_obs(_wire(encode_obs(floats)))
    assert out.dtype == np.float32 and out[0] == 1.5 and out[1] == -np.inf and math.isnan(out[2])


def test_nested_values_and_scalars() -> None:
    obs = {"text": "a", "pos": (np.int64(3), np.float32(0.5)), "flags": [True, None], "x": float("inf")}
    back = decode_obs(_wire(encode_obs(obs)))
    assert back == {"text": "a", "pos": [3, 0.5], "flags": [True, None], "x": float("inf")}
    assert type(back["pos"][0]) is int
    space = spaces.Dict({"text": Text(), "pos": spaces.Tuple([spaces.Discrete(5), spaces.Discrete(2)])})
    typed = decode_obs(_wire(encode_obs({"text": "a", "pos": (1, 0)})), space)
    assert typed == {"pos": (1, 0), "text": "a"} and isinstance(typed["pos"], tuple)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (object(), "cannot send a value of type object"),
        ({1: "a"}, "keys must be str"),
        ({"__ndarray__": "x"}, "reserves"),
        (np.array(["a"], dtype=object), "dtype object"),
        ({"a": {1, 2}}, "type set"),
    ],
)
def test_values_the_wire_cannot_carry_are_refused(value: Any, needle: str) -> None:
    with pytest.raises(CodecError, match=needle):
        encode_obs(value)


@pytest.mark.parametrize(
    ("wire", "needle"),
    [
        ({"__ndarray__": "AAAA", "dtype": "<f8", "shape": [1]}, "does not fit"),
        ({"__ndarray__": "!!", "dtype": "<f8", "shape": [0]}, "malformed encoded array"),
        ({"__ndarray__": "", "dtype": "|O", "shape": [0]}, "numeric or bool dtype"),
        ({"__ndarray__": "", "dtype": "nonsense", "shape": [0]}, "malformed encoded array"),
        ({"__float__": "1e999"}, "'nan', 'inf' or '-inf'"),
    ],
)
def test_malformed_encoded_values_are_refused(wire: Any, needle: str) -> None:
    with pytest.raises(CodecError, match=needle):
        decode_obs(wire)


def test_actions_are_shaped_by_their_space() -> None:
    box = spaces.Box(0.0, 50.0, (2,), np.float32)
    action = decode_action(_wire(encode_action(np.array([1.0, 2.5], np.float32))), box)
    assert action.dtype == np.float32 and action.tolist() == [1.0, 2.5]
    assert decode_action([3, 4], box).dtype == np.float32  # a plain JSON list is accepted too
    assert decode_action(3, spaces.Discrete(5)) == 3
    assert decode_action({"a": 1, "b": [0, 1]}, spaces.Dict({"a": spaces.Discrete(2), "b": spaces.MultiBinary(2)}))[
        "b"
    ].tolist() == [0, 1]
    # text spaces take what came: a malformed text action is the env's to judge (an invalid step)
    assert decode_action(7, Text()) == 7
    with pytest.raises(CodecError, match="shape"):
        decode_action([1.0, 2.0, 3.0], box)
    with pytest.raises(CodecError, match="integer action"):
        decode_action("left", spaces.Discrete(5))
    with pytest.raises(CodecError, match="integer action"):
        decode_action(True, spaces.Discrete(5))
    with pytest.raises(CodecError, match="missing"):
        decode_action({"a": 1}, spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Discrete(2)}))


def test_infos_are_json_safe_and_keep_their_values() -> None:
    info = {
        "task": {"id": "t1", "goal": "find", "seed": 7},
        "reward_components": {"success_reward": np.float64(1.0), "format_reward": 0.25},
        "termination_reason": TerminationReason.SUCCESS,
        "admissible_actions": ("a", "b"),
        "frame": np.zeros((2, 2, 3), np.uint8),
        "loss": float("nan"),
        "handle": object(),
        7: "int key",
    }
    wire = _wire(encode_info(info))
    assert wire["termination_reason"] == TerminationReason.SUCCESS.value
    assert wire["handle"].startswith("<object object")
    back = decode_info(wire)
    assert back["task"] == info["task"] and back["reward_components"] == {"success_reward": 1.0, "format_reward": 0.25}
    assert back["admissible_actions"] == ["a", "b"] and back["7"] == "int key"
    assert back["frame"].shape == (2, 2, 3) and math.isnan(back["loss"])


HAND_MADE = [
    Text(),
    Text(100, min_length=2, sample_max_length=10),
    spaces.Text(12, min_length=3, charset="abc#"),
    spaces.Discrete(4, start=-1),
    spaces.Discrete(3, dtype=np.int32),
    spaces.Box(-np.inf, np.inf, (3, 2), np.float32),
    spaces.Box(np.array([0, -1]), np.array([1, 5]), dtype=np.int64),
    spaces.Box(0, 255, (4, 4, 3), np.uint8),
    spaces.MultiDiscrete([3, 4], start=[1, 0]),
    spaces.MultiBinary(5),
    spaces.MultiBinary([2, 3]),
    spaces.Dict([("z", Text()), ("a", spaces.Box(0, 1, (2,)))]),
    spaces.Tuple([spaces.Discrete(2), Text(5)]),
    spaces.Sequence(spaces.Discrete(3)),
    spaces.Sequence(spaces.Box(0, 1, (2,)), stack=True),
]


@pytest.mark.parametrize("space", HAND_MADE, ids=repr)
def test_every_space_kind_round_trips_equal(space: spaces.Space[Any]) -> None:
    back = decode_space(_wire(encode_space(space)))
    assert type(back) is type(space) and back == space
    if isinstance(space, spaces.Dict):
        assert list(back.spaces) == list(space.spaces)  # key order kept
    if isinstance(space, Text):
        assert back.sample_max_length == space.sample_max_length
    sample = space.sample()
    value = decode_obs(_wire(encode_obs(sample)), back)
    assert back.contains(value), f"{value!r} not in {back}"


def test_unsupported_spaces_are_refused() -> None:
    with pytest.raises(CodecError, match="cannot send a space of type .*Graph"):
        encode_space(spaces.Graph(spaces.Box(0, 1, (2,)), None))
    with pytest.raises(CodecError, match="unknown space type 'Blob'"):
        decode_space({"type": "Blob"})
    with pytest.raises(CodecError, match="malformed encoded Discrete"):
        decode_space({"type": "Discrete", "n": "x", "start": 0, "dtype": "<i8"})


def _first_per_entry_point() -> list[envgym.EnvSpec]:
    """One id per (kind, entry point, observation/action kwargs): ids of one class share spaces
    unless a kwarg changes them; building all 258 ids takes ~8 s, these ~2 s."""
    seen: dict[tuple[str, str], envgym.EnvSpec] = {}
    for spec in envgym.list_envs():
        if spec.family != "test":
            seen.setdefault((spec.kind, spec.entry_point), spec)
    return list(seen.values())


#: Families whose first build takes seconds (an external engine loads): marked slow, started first.
SLOW_FAMILIES = {"driving", "textworld"}


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(s, marks=[pytest.mark.slow] if s.family in SLOW_FAMILIES or "TextWorld" in s.id else [])
        for s in _first_per_entry_point()
    ],
    ids=lambda s: f"{s.kind}:{s.id}",
)
def test_registered_env_spaces_round_trip(spec: envgym.EnvSpec) -> None:
    try:
        if spec.kind == "gymnasium":
            env = envgym.make(spec.id)
            pairs = [(env.observation_space, env.action_space)]
        else:
            env = envgym.make_parallel(spec.id) if spec.kind == "parallel" else envgym.make_aec(spec.id)
            pairs = [(env.observation_space(a), env.action_space(a)) for a in env.possible_agents]
    except envgym.errors.MissingDependencyError as err:
        pytest.skip(str(err))
    try:
        for obs_space, act_space in pairs:
            for space in (obs_space, act_space):
                back = decode_space(_wire(encode_space(space)))
                assert type(back) is type(space) and back == space
            action = act_space.sample()
            assert act_space.contains(decode_action(_wire(encode_action(action)), act_space))
    finally:
        env.close()
