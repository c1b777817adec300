"""On-demand profiling: requests between users and agents, and the traces they upload."""
