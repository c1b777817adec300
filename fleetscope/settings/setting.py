"""One row of the settings table: a key, its default, its type and its help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SettingType = Literal["str", "int", "float", "bool", "path"]
Source = Literal["default", "file", "env"]


@dataclass(frozen=True)
class Setting:
    key: str
    default: str | int | float | bool
    type: SettingType
    help: str
    minimum: float | None = None  # a number below it is refused where it is read (file, env)

    @property
    def env(self) -> str:
        return "FLEETSCOPE_" + self.key.upper().replace(".", "_")
