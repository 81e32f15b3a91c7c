"""Reading training configs: YAML numbers as YAML 1.2 reads them (``lr: 1e-5`` is a float, not
the string PyYAML's YAML 1.1 rules make of it), a quoted number named as such, and unknown
settings answered with the envgym name of a TRL / verl / transformers setting (``learning_rate``
-> ``lr``). No model, no torch: milliseconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envgym.cli import app
from envgym.errors import ConfigError
from envgym.trainer.config import SYNONYMS, TrainConfig, load_yaml


def test_exponent_floats_are_floats(tmp_path: Path) -> None:
    file = tmp_path / "train.yaml"
    file.write_text(
        "env_id: envgym/FrozenLake-v0\n"
        "lr: 1e-5\n"
        "weight_decay: 1E-2\n"
        "clip_high: 2.8e-1\n"
        "kl_coef: +5e-3\n"
        "entropy_coef: -1e-3\n"
        "updates: 10\n"
        "seed: 7\n"
        "lora: {r: 4, alpha: 3e1}\n"
    )
    cfg = TrainConfig.from_file(file)
    assert (cfg.lr, cfg.weight_decay, cfg.clip_high, cfg.kl_coef, cfg.entropy_coef) == (1e-5, 0.01, 0.28, 0.005, -0.001)
    assert all(isinstance(v, float) for v in (cfg.lr, cfg.weight_decay, cfg.kl_coef))
    assert cfg.lora is not None and cfg.lora["alpha"] == 30.0
    # integers stay integers (a float where an int belongs would be refused)
    assert (cfg.updates, cfg.seed) == (10, 7) and isinstance(cfg.updates, int)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-5", 1e-5),
        ("1E5", 1e5),
        ("-2.5e+3", -2500.0),
        ("6.02e23", 6.02e23),
        (".5e1", 5.0),
        ("1_000.5", 1000.5),
        ("3", 3),
        ("0x1f", 31),
        ("1.5", 1.5),
        (".inf", float("inf")),
        ("e5", "e5"),  # not a number
        ("1e", "1e"),
        ("'1e-5'", "1e-5"),  # quoted: a string on purpose
        ("1e-5x", "1e-5x"),
        ("2026-11-29", None),  # a date stays a date (checked below)
    ],
)
def test_load_yaml_scalars(text: str, value: object) -> None:
    loaded = load_yaml(f"v: {text}\n")["v"]
    if value is None:
        assert type(loaded).__name__ == "date"
        return
    assert loaded == value and type(loaded) is type(value)


def test_load_yaml_leaves_pyyaml_alone() -> None:
    import yaml

    load_yaml("v: 1e-5\n")
    assert yaml.safe_load("v: 1e-5\n") == {"v": "1e-5"}  # the fix is our loader's, not a global patch


def test_a_quoted_number_is_named_as_such(tmp_path: Path) -> None:
    file = tmp_path / "train.json"
    file.write_text(json.dumps({"env_id": "envgym/FrozenLake-v0", "lr": "1e-5"}))
    with pytest.raises(ConfigError, match=r"lr must be a number > 0, got '1e-5' \(a string: write the number"):
        TrainConfig.from_file(file)
    with pytest.raises(ConfigError, match=r"lr must be a number > 0, got 'fast'\.$"):
        TrainConfig(env_id="envgym/FrozenLake-v0", lr="fast")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("learning_rate", "lr"),  # transformers / TRL
        ("num_generations", "group_size"),  # TRL GRPO
        ("beta", "kl_coef"),  # TRL GRPO
        ("kl_loss_coef", "kl_coef"),  # verl
        ("max_completion_length", "max_new_tokens"),  # TRL
        ("response_length", "max_new_tokens"),  # verl
        ("loss_agg_mode", "loss_aggregation"),  # verl
        ("epsilon_high", "clip_high"),  # TRL
        ("clip_ratio_low", "clip_low"),  # verl
        ("output_dir", "out"),
        ("model_name_or_path", "model"),
        ("num_iterations", "ppo_epochs"),
        ("entropy_coeff", "entropy_coef"),
        ("max_steps", "updates"),
    ],
)
def test_unknown_settings_suggest_the_envgym_name(tmp_path: Path, key: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        TrainConfig.from_dict({"env_id": "envgym/FrozenLake-v0", key: 1})
    message = str(err.value)
    assert f"unknown training setting {key!r}. Did you mean {field!r}?" in message
    assert "reward_wrappers?" not in message


def test_synonyms_name_real_fields_and_plain_typos_still_work() -> None:
    fields = set(TrainConfig.__dataclass_fields__)
    assert set(SYNONYMS.values()) <= fields
    assert not set(SYNONYMS) & fields  # a synonym never shadows a real setting
    with pytest.raises(ConfigError, match=r"unknown training setting 'updtes'\. Did you mean 'updates'\?"):
        TrainConfig.from_dict({"env_id": "envgym/FrozenLake-v0", "updtes": 3})


def test_cli_set_and_file_suggest_the_envgym_name(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--env", "envgym/FrozenLake-v0", "--set", "learning_rate=1e-5"])
    assert result.exit_code == 2
    assert "Did you mean 'lr'?" in " ".join(result.output.split())
    file = tmp_path / "train.yaml"
    file.write_text("env_id: envgym/FrozenLake-v0\nlearning_rate: 1e-5\n")
    result = runner.invoke(app, ["train", "--config", str(file), "--show-config"])
    assert result.exit_code == 2 and "Did you mean 'lr'?" in " ".join(result.output.split())
    file.write_text("env_id: envgym/FrozenLake-v0\nlr: 1e-5\n")
    result = runner.invoke(app, ["train", "--config", str(file), "--show-config"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["lr"] == 1e-5
