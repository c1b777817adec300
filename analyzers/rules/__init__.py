"""Built-in telemetry (R1-R17) and pipeline (P1-P3) rules, one module per rule or close family.

Each module registers through the `fleetscope.analyzers` entry-point group exactly as an external
analyzer would (see analyzers.base). Shared query helpers live in `_common`.
"""
