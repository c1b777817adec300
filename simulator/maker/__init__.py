"""The fleet maker: one place to describe a fleet for tests, the demo and the benchmarks, and one
way out for its rows (issue 14 folded the dashboard's synthetic warehouse, the warehouse's test
batches and the rule tests' fleet builder into it).

Describe the fleet the way the test needs, then take its contract tables (`tables`):
- `jobs`: clusters of hosts running jobs at a constant activity (plus noise), faults, step
  metrics; vectorized, so a week of 1,000 GPUs is written in minutes (`write_segments`: the
  warehouse's own segment layout and roll-ups). The dashboard's, reports' and bench's fleets.
- `series`: a few GPUs, hosts and ranks whose every value is a constant or a function of time
  (healthy unless a test says otherwise); row by row, for rule tests.
- `batches`: one host's rows with plausible random values drawn from a seed, for ingest tests
  (sent by `simulator.wire`).
`jobs.Fleet` and `series.Fleet` are both `tables.Maker`s: `tables.connect` loads either into a
DuckDB, `tables.publish` writes either as live segments.

Must never: write into a real warehouse's folder, or import `analyzers` (a rule test's run over a
made fleet lives with the tests). The package itself imports nothing.
"""
