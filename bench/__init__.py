"""Benchmarks: each `python -m bench.<name>` runs against its named peer in the same run."""
