"""Settings as data: one table (table.py) drives the TOML loader and environment overrides
(loader.py), `config show`, the docs and the typed view (typed.py, generated from the table).

Read a value typed, `settings.agent.dcgm_url` (checked by mypy), or by key,
`settings.get_str("agent.dcgm_url")`. Add a setting as one row of `SETTINGS` in table.py, then
`make docs`.
"""

from fleetscope.settings.loader import Settings, config_path_from, load_settings
from fleetscope.settings.table import SETTINGS, Setting, SettingType

__all__ = ["SETTINGS", "Setting", "SettingType", "Settings", "config_path_from", "load_settings"]
