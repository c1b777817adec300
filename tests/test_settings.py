"""Settings: defaults, then the TOML file, then the environment; unknown keys are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetscope.errors import ConfigError
from fleetscope.settings import SETTINGS, load_settings


def test_defaults_come_from_the_table(tmp_path: Path) -> None:
    settings = load_settings(env={})
    assert settings.agent.interval_s == 10.0
    assert settings.source("agent.interval_s") == "default"


def test_file_then_environment_override(tmp_path: Path) -> None:
    config = tmp_path / "fleetscope.toml"
    config.write_text('[agent]\ninterval_s = 2.5\ntoken = "from-file"\n')
    settings = load_settings(config, env={"FLEETSCOPE_AGENT_TOKEN": "from-env"})
    assert settings.agent.interval_s == 2.5
    assert settings.source("agent.interval_s") == f"file {config}"
    assert settings.agent.token == "from-env"
    assert settings.source("agent.token") == "env FLEETSCOPE_AGENT_TOKEN"


def test_unknown_key_in_file_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "fleetscope.toml"
    config.write_text("[agent]\nintervall_s = 2\n")
    with pytest.raises(ConfigError, match=r"unknown setting 'agent\.intervall_s'"):
        load_settings(config, env={})


def test_mistyped_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"\$FLEETSCOPE_SERVER_PORT"):
        load_settings(env={"FLEETSCOPE_SERVER_PORT": "eighty"})


def test_a_value_under_its_minimum_is_refused_where_it_was_read(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^analyzers\.sharing_every_s from \$FLEETSCOPE_ANALYZERS_SHARING_EVERY_S: "
        r"at least 60, got -5$",
    ):
        load_settings(env={"FLEETSCOPE_ANALYZERS_SHARING_EVERY_S": "-5"})
    config = tmp_path / "fleetscope.toml"
    config.write_text("[analyzers]\nsharing_days = -1\n")
    with pytest.raises(ConfigError, match=rf"sharing_days from {config}: at least 0, got -1"):
        load_settings(config, env={})
    assert load_settings(env={"FLEETSCOPE_ANALYZERS_SHARING_DAYS": "0"}).analyzers.sharing_days == 0


def test_a_minimum_is_on_numbers_only_and_the_default_meets_it() -> None:
    bounded = [s for s in SETTINGS if s.minimum is not None]
    assert {s.key for s in bounded} >= {"analyzers.sharing_every_s", "analyzers.percentiles_days"}
    for setting in bounded:
        assert setting.type in ("int", "float") and float(setting.default) >= setting.minimum


def test_every_setting_has_help_and_a_section() -> None:
    for setting in SETTINGS:
        assert "." in setting.key and setting.help.endswith(".")
