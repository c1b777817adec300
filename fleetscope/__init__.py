"""fleetscope: where a GPU fleet's GPU-hours go, and how to win them back.

This core package is the contract every stage shares and nothing else: the data contract
(`contract`), the DCGM field tables (`dcgm_fields`), the Prometheus exposition parser
(`exposition`), DCGM samples to rows (`normalize`), attribution from exporter labels
(`attribution`), settings (`settings`), the exception tree (`errors`) and the command-line edge
(`edge`). It imports no stage, and stays importable on a GPU host with the agent's light
dependencies: never import DuckDB, Streamlit or Celery here. The `fleetscope` command line itself
lives in the application package, `app`.
"""

__version__ = "0.1.0"
