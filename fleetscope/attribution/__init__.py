"""Attribution shared by every path that turns dcgm-exporter labels into gpu_samples rows.

The source protocol (base.py), the label sources every dcgm-exporter page carries (labels.py) and
the resolver (resolver.py). Host-local sources (override file, Slurm mapping folder, /proc) stay
in collector.attribution: they exist only on a GPU host.
"""
