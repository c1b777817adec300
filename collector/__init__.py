"""Collector: the per-host agent and its sources (dcgm-exporter, NVML, host, training SDK).

Runs on GPU hosts with light dependencies. Shares only the data contract (fleetscope.contract)
with the server side; must never import DuckDB, Streamlit, Celery or the warehouse.
"""
