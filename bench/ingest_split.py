"""Where the ingest server's CPU goes: the writer thread against the request threads (issue 27).

    .venv/bin/python -m bench.ingest_split --agents 16 --seconds 30

An embedded server (`warehouse.ingest.runtime.Server`, `server.plugins` empty: the ingest path alone)
runs in this process; `--agents` simulated agents (bench.ack_load's: one kept-alive connection
each, one 8-GPU gpu_samples batch a second, waiting for the 202) run in a child process, so their
CPU is not counted. Over the window, this process's user + system CPU (/proc/self/stat) is split
into the writer thread's (/proc/self/task/<its native id>/stat) and the rest (HTTP request
threads: parse, decode, validate, digest, wait). Run it from a checkout of another commit (with
this file copied there) for a before/after on the same machine.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

from bench.ack_load import TOKEN, _agents

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--samples", type=int, default=1)
    args = parser.parse_args(argv)
    from fleetscope.settings import load_settings
    from warehouse.ingest.runtime import Server

    with tempfile.TemporaryDirectory(prefix="bench-ingest-split-") as tmp:
        settings = load_settings(env={}).with_overrides(
            core__data_dir=str(Path(tmp) / "data"),
            server__tokens=TOKEN,
            server__plugins="",
            warehouse__maintenance_interval_s=3600.0,
        )
        server = Server(settings, port=0)
        server.start()
        try:
            writer_thread = server.writer._thread
            assert writer_thread is not None and writer_thread.native_id is not None
            writer_stat = Path(f"/proc/self/task/{writer_thread.native_id}/stat")
            ctx = mp.get_context("spawn")
            recv, send = ctx.Pipe(duplex=False)
            warmup_s = 5.0
            clients = ctx.Process(
                target=_agents,
                args=(
                    server.url,
                    list(range(args.agents)),
                    (1.0, warmup_s + args.seconds, args.samples),
                    send,
                ),
            )
            clients.start()
            time.sleep(warmup_s)
            load = os.getloadavg()[0]
            p0, w0 = _cpu_s(Path("/proc/self/stat")), _cpu_s(writer_stat)
            b0 = server.writer.stats.batches_committed + server.writer.stats.duplicates
            time.sleep(args.seconds)
            p1, w1 = _cpu_s(Path("/proc/self/stat")), _cpu_s(writer_stat)
            b1 = server.writer.stats.batches_committed + server.writer.stats.duplicates
            latencies, errors, _answers = recv.recv()
            clients.join(120)
        finally:
            server.stop()
    batches = max(1, b1 - b0)
    acks = sorted(latencies)
    p50, p99 = (acks[min(len(acks) - 1, int(q * len(acks)))] if acks else 0.0 for q in (0.5, 0.99))
    total, writer = p1 - p0, w1 - w0
    print(
        f"{args.agents} agents, {args.seconds:g} s, {batches} batches acknowledged, load {load:.1f}: "
        f"server CPU {total:.2f} s = writer thread {writer:.2f} s + request threads "
        f"{total - writer:.2f} s; per batch {1000 * total / batches:.2f} ms "
        f"(writer {1000 * writer / batches:.2f} ms, requests {1000 * (total - writer) / batches:.2f} ms); "
        f"ack p50 {p50:.3f} s, p99 {p99:.3f} s, {errors} errors"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
