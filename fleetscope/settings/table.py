"""Settings as data: one table drives the TOML loader, environment overrides, `config show` and docs.

Precedence, lowest first: the default in `SETTINGS`, the TOML file, the environment variable
(`FLEETSCOPE_` + the key upper-cased with dots as underscores: `agent.interval_s` is
`FLEETSCOPE_AGENT_INTERVAL_S`). The TOML file is `--config PATH`, else `$FLEETSCOPE_CONFIG`, else
`./fleetscope.toml` when it exists. Keys are `section.name`; in TOML they are written as tables
(`[agent]` then `interval_s = 1.0`).

Every stage adds its keys to the one table below, in its own section. Never read `os.environ`
elsewhere for configuration.
"""

from __future__ import annotations

from fleetscope.settings.rows_analysis import ROWS as ANALYSIS_ROWS
from fleetscope.settings.rows_cost import ROWS as COST_ROWS
from fleetscope.settings.rows_host import ROWS as HOST_ROWS
from fleetscope.settings.rows_server import ROWS as SERVER_ROWS
from fleetscope.settings.setting import Setting, SettingType, Source

__all__ = ["SETTINGS", "Setting", "SettingType", "Source"]

# The one table, kept in four files by stage so none outgrows 500 lines: the core and the agent
# (rows_host), the warehouse (rows_server), analyzers, dashboard, reports and simulator
# (rows_analysis), energy and money (rows_cost). Add a key to its stage's file, in its own section.
SETTINGS: tuple[Setting, ...] = HOST_ROWS + SERVER_ROWS + ANALYSIS_ROWS + COST_ROWS
