"""Settings from the table (fleetscope/settings/table.py): defaults, then the TOML file, then the
environment, each value coerced to its row's type; the effective `Settings` with each value's
origin.

Code reads a value typed, `settings.agent.dcgm_url` (the generated fleetscope/settings/typed.py),
so mypy catches a misspelt key or a wrong type; a path setting is resolved with
`settings.path(settings.agent.spool_dir)`. Reading by key (`raw`, `source`, `rows`) is for generic
use only, where the key is data (`config show`, docgen, handing settings on as environment
variables): tests/core/test_settings_call_sites.py fails when a package reads a literal key.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetscope.errors import ConfigError
from fleetscope.settings.table import SETTINGS, Setting
from fleetscope.settings.typed import TypedSettings

_BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}


def _coerce(setting: Setting, raw: object, origin: str) -> str | int | float | bool:
    try:
        if setting.type == "bool":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off", ""}:
                return False
            raise ValueError(text)
        if setting.type == "int":
            if isinstance(raw, bool):
                raise ValueError(raw)
            return int(_at_least(setting, int(str(raw)), origin))
        if setting.type == "float":
            if isinstance(raw, bool):
                raise ValueError(raw)
            return _at_least(setting, float(str(raw)), origin)
        return str(raw)
    except ValueError as exc:
        raise ConfigError(
            f"{setting.key} from {origin}: expected {setting.type}, got {raw!r}"
        ) from exc


def _at_least(setting: Setting, value: float, origin: str) -> float:
    """A duration or count below its row's minimum never reaches the code: a negative
    `analyzers.sharing_every_s` recomputed the week's plan on every tick."""
    if setting.minimum is not None and value < setting.minimum:
        raise ConfigError(
            f"{setting.key} from {origin}: at least {setting.minimum:g}, got {value:g}"
        )
    return value


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, key + "."))
        else:
            flat[key] = value
    return flat


class Settings(TypedSettings):
    """The effective settings: a value and its origin for every key in `SETTINGS`."""

    def __init__(
        self, values: dict[str, str | int | float | bool], sources: dict[str, str]
    ) -> None:
        self._values = values
        self._sources = sources

    def _section(self, section: str) -> dict[str, Any]:
        """The section's values by field name, for the typed view (`settings.agent.dcgm_url`)."""
        out: dict[str, Any] = {}
        for setting in SETTINGS:
            head, _, name = setting.key.partition(".")
            if head == section:
                value = self._values[setting.key]
                out[name] = float(value) if setting.type == "float" else value
        return out

    def raw(self, key: str) -> str | int | float | bool:
        """The value of `key`, for generic use only (a key computed at run time: `config show`,
        settings handed on as environment variables); code reads `settings.<section>.<name>`."""
        if key not in self._values:
            raise ConfigError(f"unknown setting {key!r}")
        return self._values[key]

    def path(self, value: str, default_name: str = "") -> Path:
        """A path setting's value as a `Path` (`~` expanded, relative to the current directory):
        `settings.path(settings.agent.spool_dir)`. With `default_name`, an empty value means
        `<core.data_dir>/<default_name>`, for the files the warehouse and reports keep there."""
        if not value and default_name:
            return self.path(self.core.data_dir) / default_name
        return Path(value).expanduser()

    def source(self, key: str) -> str:
        """Where `key`'s value came from (default, file, env, override), for generic use only."""
        self.raw(key)
        return self._sources[key]

    def with_overrides(self, **overrides: str | int | float | bool) -> Settings:
        """A copy with some keys replaced (keys written with `__` for dots), as tests and the demo need."""
        values = dict(self._values)
        sources = dict(self._sources)
        for name, value in overrides.items():
            key = name.replace("__", ".")
            setting = _BY_KEY.get(key)
            if setting is None:
                raise ConfigError(f"unknown setting {key!r}")
            values[key] = _coerce(setting, value, "override")
            sources[key] = "override"
        return Settings(values, sources)

    def rows(self) -> list[tuple[str, str | int | float | bool, str, str]]:
        """(key, value, source, env var) for every setting, in table order."""
        return [(s.key, self._values[s.key], self._sources[s.key], s.env) for s in SETTINGS]


def config_path_from(
    explicit: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> Path | None:
    if explicit:
        return Path(explicit)
    if env.get("FLEETSCOPE_CONFIG"):
        return Path(env["FLEETSCOPE_CONFIG"])
    default = Path("fleetscope.toml")
    return default if default.exists() else None


def load_settings(
    config: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Read defaults, then the TOML file, then the environment; reject unknown keys in the file."""
    environ = os.environ if env is None else env
    values: dict[str, str | int | float | bool] = {s.key: s.default for s in SETTINGS}
    sources: dict[str, str] = {s.key: "default" for s in SETTINGS}
    path = config_path_from(config, environ)
    if path is not None:
        try:
            with path.open("rb") as handle:
                table = tomllib.load(handle)
        except FileNotFoundError as exc:
            raise ConfigError(f"config file {path} does not exist") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
        for key, raw in _flatten(table).items():
            setting = _BY_KEY.get(key)
            if setting is None:
                raise ConfigError(f"config file {path}: unknown setting {key!r}")
            values[key] = _coerce(setting, raw, str(path))
            sources[key] = f"file {path}"
    for setting in SETTINGS:
        if setting.env in environ:
            values[setting.key] = _coerce(setting, environ[setting.env], f"${setting.env}")
            sources[setting.key] = f"env {setting.env}"
    return Settings(values, sources)
