"""Model FLOPs utilization: measured for SDK-attached jobs, DCGM's tensor-pipe activity as a
labelled proxy for every other job (docs/analyzers.md, "MFU")."""
