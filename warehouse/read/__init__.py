"""How everything but the writer reads telemetry: views over the live segments, time windows, and
the roll-ups that pages and reports read."""
