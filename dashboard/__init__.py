"""Streamlit dashboard: fleet, then job, then trace. Read-only: never writes telemetry."""
