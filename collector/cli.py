"""`fleetscope-agent`: the per-host collector's command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    print("fleetscope-agent: not implemented yet", file=sys.stderr)
    return 1
