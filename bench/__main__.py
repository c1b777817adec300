"""`make bench` / `python -m bench [--quick]`: run every benchmark, each against its named peer.

Each benchmark is its own module (`python -m bench.<name>`), run here one after the other in a
fresh interpreter so that one's memory and threads cannot colour the next one's figures. Each
writes its own section of bench/RESULTS.md.
"""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = (
    "agent",
    "agent_scrape",
    "ingest",
    "ingest_prometheus",
    "query_prometheus",
    "virtual_prometheus",
    "sketch",
    "traces",
    "trace_command",
    "analyzers",
    "dashboard",
    "cli",
)


def main(argv: list[str]) -> int:
    failed = []
    for name in BENCHMARKS:
        print(f"== bench.{name} {' '.join(argv)}", flush=True)
        if subprocess.run([sys.executable, "-m", f"bench.{name}", *argv]).returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
