"""The settings and command references are generated; the committed copies must be current."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import docgen

DOCS = Path(__file__).parents[1] / "docs"


@pytest.fixture(autouse=True)
def fixed_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


def test_settings_reference_is_current() -> None:
    assert (DOCS / "settings.md").read_text() == docgen.settings_markdown(), "run `make docs`"


def test_command_reference_is_current() -> None:
    assert (DOCS / "cli.md").read_text() == docgen.cli_markdown(), "run `make docs`"


def test_every_setting_and_command_is_documented() -> None:
    from fleetscope.settings import SETTINGS

    settings_doc = (DOCS / "settings.md").read_text()
    assert all(f"`{s.key}`" in settings_doc for s in SETTINGS)
    cli_doc = (DOCS / "cli.md").read_text()
    for command in ("demo", "server", "simulate", "trace analyze", "config show"):
        assert f"## `fleetscope {command}`" in cli_doc
    for command in ("run", "once", "check"):
        assert f"## `fleetscope-agent {command}`" in cli_doc
