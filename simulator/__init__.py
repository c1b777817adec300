"""Simulated GPU fleet: dcgm-exporter pages byte-for-byte in the exporter's format, driven by job
scenarios with known truth. The only stand-in in the project, for what cannot exist here (a GPU).

Modules, each with one job: fields (what the exporter prints), hardware (GPU models), scenarios
(how jobs use GPUs), timeline (a job's levels over any stretch of it), truth (which rules
should fire per job), users (R4, per user over a window), fleet (hosts and the job schedule),
signals (values per GPU and second), render (pages), batch (Arrow tables), records (job and
truth JSON), sim (the facade), serve (HTTP), hooks (job metadata to ingest), cli (`fleetscope
simulate`). The package itself imports nothing, so registering the CLI command stays cheap:
import `simulator.sim.FleetSimulator` and `simulator.fleet.FleetSpec`.

Must never: be imported by code that ships to GPU hosts for anything but tests and demos.
"""
