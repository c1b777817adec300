"""Settings as data: one table (table.py) drives the TOML loader and environment overrides
(loader.py), `config show`, the docs and the typed view (typed.py, generated from the table).

Read a value typed, `settings.agent.dcgm_url` (checked by mypy), and a path setting as a `Path`
with `settings.path(settings.agent.spool_dir)`; reading by key (`settings.raw(key)`) is for generic
use only, where the key is data (`config show`, docgen). Add a setting as one row of `SETTINGS` in
table.py, then `make docs`.
"""

from fleetscope.settings.loader import Settings, config_path_from, load_settings
from fleetscope.settings.table import SETTINGS, Setting, SettingType

__all__ = ["SETTINGS", "Setting", "SettingType", "Settings", "config_path_from", "load_settings"]
