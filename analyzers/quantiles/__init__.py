"""Percentiles from telemetry: pane sketches of a window's samples (panes), their three storage
tiers under `analyzers.sketches_dir` (tiers) and `fleetscope quantiles` (cli).
"""
