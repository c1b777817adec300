"""Simulated GPU fleet: dcgm-exporter pages byte-for-byte in the exporter's format, driven by job
scenarios with known truth. The only stand-in in the project, for what cannot exist here (a GPU)."""
