"""Metric sources on one host: dcgm-exporter, NVML, host (psutil + cgroup v2), node_exporter.

Two small protocols (base.py): a GPU source yields `GpuReading`s (attribution runs after), a host
source yields host_samples rows. Every OS or network boundary is injected: the HTTP transport, the
NVML library object, the /proc and /sys/fs/cgroup roots, the clock.

Must never: import DuckDB, Streamlit, Celery or the warehouse.
"""
