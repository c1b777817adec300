"""fleetscope: where a GPU fleet's GPU-hours go, and how to win them back.

This core package holds only what every stage shares: the data contract (`contract`), settings
(`settings`), the exception tree (`errors`) and the `fleetscope` command line (`cli`). It must stay
importable on a GPU host with the agent's light dependencies: never import DuckDB, Streamlit or
Celery here.
"""

__version__ = "0.1.0"
