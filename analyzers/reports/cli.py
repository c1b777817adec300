"""Registers this stage's `fleetscope` commands (see fleetscope.cli)."""

from __future__ import annotations

from typing import Any


def register(subparsers: Any) -> None:
    """No commands yet."""
