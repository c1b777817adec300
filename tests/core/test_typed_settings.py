"""The typed settings view is generated from the one settings table and agrees with it."""

from __future__ import annotations

import dataclasses

import pytest

from app import docgen
from fleetscope.settings import SETTINGS, load_settings


def test_typed_module_is_current() -> None:
    assert docgen.TYPED_SETTINGS.read_text() == docgen.typed_settings_source(), "run `make docs`"


def test_every_key_reads_the_same_typed_and_by_key() -> None:
    settings = load_settings(env={"FLEETSCOPE_AGENT_DCGM_URL": "http://gpu-7:9400/metrics"})
    for setting in SETTINGS:
        section, name = setting.key.split(".", 1)
        assert getattr(getattr(settings, section), name) == settings.raw(setting.key)
    assert settings.agent.dcgm_url == "http://gpu-7:9400/metrics"
    assert isinstance(settings.agent.interval_s, float)


def test_overrides_reach_the_typed_view_and_sections_are_frozen() -> None:
    settings = load_settings(env={}).with_overrides(agent__interval_s=2.5)
    assert settings.agent.interval_s == 2.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.agent.interval_s = 1.0  # type: ignore[misc]
