"""Analyzers: antipattern rules, trace analyses, quantile sketches, scheduling and reports.
Reads the warehouse; never writes telemetry."""
