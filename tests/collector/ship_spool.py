"""A stand-in agent process for tests/collector/test_agent_spool_faults.py: the collector's real spool
and shipper draining `<spool>` to `<url>`, one batch at a time, until the spool is empty.

    python tests/collector/ship_spool.py <spool_dir> <url> <token>
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from collector.backoff import Backoff
from collector.http import KeepAliveTransport
from collector.metrics import AgentMetrics
from collector.shipper import Shipper
from collector.spool import Spool


def main(spool_dir: str, url: str, token: str) -> int:
    shipper = Shipper(
        Spool(Path(spool_dir), max_bytes=10**9), ingest_url=url, token=token, agent_name="kill9",
        transport=KeepAliveTransport(), metrics=AgentMetrics(), timeout_s=30,
        backoff=Backoff(base_s=0.05, cap_s=0.5),
    )  # fmt: skip
    stop = threading.Event()
    while shipper.spool.depth and not stop.is_set():
        if not shipper.drain():
            stop.wait(shipper.backoff.next_delay())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:4]))
