"""Agents against a server that is `kill -9`'d again and again, then down for a while.

    .venv/bin/python -m bench.faults                       # long run: 6 kills, 120 s outage
    .venv/bin/python -m bench.faults --kills 2 --down-s 3  # what tests/warehouse/test_server_faults.py runs

Each agent is the collector's real spool and shipper (threads of this process) sealing a batch of
8 GPUs x 5 samples every `--interval-s`, with unique (host, gpu, ts) rows. The server is a real
`fleetscope server` process on a fixed loopback port and data dir: it is killed with SIGKILL
`--kills` times at random moments (mid-commit included), restarted, then stopped for `--down-s`
seconds and restarted for good. After the agents stop sealing, every spool must drain (each batch
acknowledged), and the warehouse, read back through the segments, must hold every sealed row
exactly once: 0 lost, 0 duplicated. Figures go to bench/RESULTS.md by hand, with the load.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.fuzz import free_port, start_server
from collector.backoff import Backoff
from collector.http import KeepAliveTransport
from collector.metrics import AgentMetrics
from collector.shipper import Shipper
from collector.spool import Spool
from fleetscope.contract import to_ipc
from simulator.maker.batches import EPOCH_MS, gpu_batch

TOKEN = "faults-" + "0" * 24


@dataclass(frozen=True)
class FaultResult:
    sealed_rows: int
    stored_rows: int
    distinct_rows: int
    batches: int
    kills: int
    drain_s: float

    @property
    def lost(self) -> int:
        return self.sealed_rows - self.distinct_rows

    @property
    def duplicated(self) -> int:
        return self.stored_rows - self.distinct_rows


class FleetOfAgents:
    """`agents` spool+shipper pairs, each sealing one batch per interval until told to stop."""

    def __init__(self, root: Path, url: str, agents: int, interval_s: float) -> None:
        self.interval_s = interval_s
        self.stop_sealing = threading.Event()
        self.stop_shipping = threading.Event()
        self.sealed_rows = 0
        self.batches = 0
        self._lock = threading.Lock()
        self.shippers = [
            Shipper(
                Spool(root / f"spool-{a}", max_bytes=10**9),
                ingest_url=url,
                token=TOKEN,
                agent_name=f"agent-{a}",
                transport=KeepAliveTransport(),
                metrics=AgentMetrics(),
                timeout_s=30,
                backoff=Backoff(base_s=0.05, cap_s=1.0),
            )
            for a in range(agents)
        ]
        self.threads = [
            threading.Thread(target=self._seal, args=(a,), daemon=True) for a in range(agents)
        ] + [
            threading.Thread(target=s.run, args=(self.stop_shipping, 0.2), daemon=True)
            for s in self.shippers
        ]

    @staticmethod
    def _shipper(root: Path, url: str, a: int) -> Shipper:
        return Shipper(
            Spool(root / f"spool-{a}", max_bytes=10**9),
            ingest_url=url, token=TOKEN, agent_name=f"agent-{a}",
            transport=KeepAliveTransport(), metrics=AgentMetrics(), timeout_s=30,
            backoff=Backoff(base_s=0.05, cap_s=1.0),
        )  # fmt: skip

    def _seal(self, a: int) -> None:
        shipper = self.shippers[a]
        n = 0
        while not self.stop_sealing.is_set():
            batch = gpu_batch(f"agent-{a}", start_ms=EPOCH_MS + n * 5000, timestamps=5)
            shipper.spool.put("gpu_samples", to_ipc(batch))
            shipper.wakeup.set()
            with self._lock:
                self.sealed_rows += batch.num_rows
                self.batches += 1
            n += 1
            self.stop_sealing.wait(self.interval_s)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def pending(self) -> int:
        return sum(s.spool.depth for s in self.shippers)

    def stop(self) -> None:
        self.stop_sealing.set()
        self.stop_shipping.set()
        for shipper in self.shippers:
            shipper.wakeup.set()
        for thread in self.threads:
            thread.join(60)
        for shipper in self.shippers:
            transport = shipper.transport
            if isinstance(transport, KeepAliveTransport):
                transport.close()


def run(
    root: Path, *, agents: int, kills: int, down_s: float, interval_s: float, seed: int
) -> FaultResult:
    rng = random.Random(seed)
    data_dir, port = root / "data", free_port()
    process, url = start_server(data_dir, TOKEN, port=port)
    fleet = FleetOfAgents(root, url, agents, interval_s)
    fleet.start()
    try:
        for _ in range(kills):
            time.sleep(rng.uniform(0.5, 2.0))
            process.send_signal(signal.SIGKILL)
            process.wait()
            process, _ = start_server(data_dir, TOKEN, port=port)
        time.sleep(rng.uniform(0.5, 2.0))
        process.send_signal(signal.SIGKILL)
        process.wait()
        time.sleep(down_s)  # down: agents spool and back off
        process, _ = start_server(data_dir, TOKEN, port=port)
        time.sleep(interval_s * 2)
        fleet.stop_sealing.set()
        started = time.monotonic()
        while fleet.pending() and time.monotonic() - started < 300:
            for shipper in fleet.shippers:
                shipper.wakeup.set()
            time.sleep(0.1)
        drain_s = time.monotonic() - started
        assert fleet.pending() == 0, f"{fleet.pending()} batches never acknowledged"
    finally:
        fleet.stop()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
    from warehouse.read.reader import open_segments

    conn = open_segments(data_dir / "segments")
    stored, distinct = conn.execute(
        "SELECT count(*), count(DISTINCT (host, gpu_index, ts)) FROM gpu_samples"
    ).fetchall()[0]
    return FaultResult(
        fleet.sealed_rows, int(stored), int(distinct), fleet.batches, kills + 1, drain_s
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--down-s", type=float, default=120.0)
    parser.add_argument("--interval-s", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        result = run(
            Path(tmp), agents=args.agents, kills=args.kills, down_s=args.down_s,
            interval_s=args.interval_s, seed=args.seed,
        )  # fmt: skip
    print(
        f"{args.agents} agents, {result.kills} kill -9, then {args.down_s:g} s down: "
        f"{result.batches} batches, {result.sealed_rows} rows sealed and acknowledged, "
        f"{result.stored_rows} stored, {result.distinct_rows} distinct: lost {result.lost}, "
        f"duplicated {result.duplicated}; spools drained {result.drain_s:.1f} s after sealing "
        f"stopped; {time.monotonic() - started:.0f} s in all; load {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after"
    )
    return 0 if result.lost == result.duplicated == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
