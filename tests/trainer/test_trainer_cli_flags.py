"""``envgym train``'s flags are generated from ``TrainConfig``'s fields (one declaration,
``TRAIN_FLAGS``): each flag has its field's type and documentation, and a new entry is a new,
working flag."""

from __future__ import annotations

import inspect
import json
import typing
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from envgym.cli import app
from envgym.cli._options import field_options
from envgym.cli._options import flag_type as _flag_type
from envgym.cli._train import TRAIN_FLAGS
from envgym.trainer.config import TrainConfig, field_help

runner = CliRunner()


def _train_params() -> dict[str, Any]:
    command = typer.main.get_command(app).commands["train"]  # type: ignore[attr-defined]
    return {param.name: param for param in command.params}


def test_every_declared_flag_has_its_fields_type_and_help() -> None:
    params = _train_params()
    for name, long, short in TRAIN_FLAGS:
        param = params[name]
        assert param.opts[0] == long and (short is None or short in param.opts)
        assert param.help == field_help(name).replace("<", "\\<")  # type: ignore[attr-defined]
        assert param.bare_type() == _flag_type(TrainConfig, name).__name__, name
        assert param.default is None  # unset: the file's value or the default stays
    assert _flag_type(TrainConfig, "group_size") is int  # int | str ('auto') is an int flag
    assert _flag_type(TrainConfig, "max_turns") is int  # int | str | None
    assert _flag_type(TrainConfig, "lr") is float
    assert _flag_type(TrainConfig, "dynamic_sampling") is bool
    with pytest.raises(TypeError, match="env_kwargs"):
        _flag_type(TrainConfig, "env_kwargs")


def test_flags_parse_to_the_fields_type() -> None:
    base = ["train", "--env", "envgym/FrozenLake-v0", "--show-config"]
    shown = json.loads(runner.invoke(app, [*base, "--lr", "1e-5", "-g", "6", "--groups", "2"]).stdout)
    assert (shown["lr"], shown["group_size"], shown["groups_per_update"]) == (1e-5, 6, 2)
    result = runner.invoke(app, [*base, "--group-size", "2.5"])
    assert result.exit_code == 2 and "Invalid value for '--group-size'" in result.output


def test_a_new_entry_is_a_working_flag() -> None:
    params = field_options(
        TrainConfig, [("kl_coef", "--kl-coef", None), ("dynamic_sampling", "--dynamic-sampling", None)]
    )
    seen: dict[str, Any] = {}

    def command(**fields: Any) -> None:
        seen.update(fields)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    tiny = typer.Typer()
    tiny.command()(command)
    result = runner.invoke(tiny, ["--kl-coef", "0.05", "--dynamic-sampling"])
    assert result.exit_code == 0, result.output
    assert seen == {"kl_coef": 0.05, "dynamic_sampling": True}
    help_text = " ".join(runner.invoke(tiny, ["--help"]).output.replace("│", " ").split())
    assert "Weight of the KL penalty to the initial policy" in help_text
    assert all(typing.get_origin(p.annotation) is Annotated for p in params)
