"""Prometheus in: remote_write receiver and the import of a Prometheus server's history."""
