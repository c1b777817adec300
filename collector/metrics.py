"""The agent's own metrics and health, on its own CollectorRegistry (never the global one).

Served at `/metrics` (Prometheus text) and `/healthz` (200 "ok" while the last successful scrape is
younger than three intervals, else 503 with the reason), on agent.metrics_port.

Must never: register on prometheus_client's global REGISTRY (tests and several agents in one
process would collide), or let a slow scraper of /metrics block the agent loop (own thread).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from fleetscope.process_metrics import register_process_metrics


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.scrape_duration = Histogram(
            "fleetscope_agent_scrape_duration_seconds",
            "Time to scrape, parse, normalize and attribute one round of sources.",
            ["source"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=r,
        )
        self.samples_collected = Counter(
            "fleetscope_agent_samples_collected_total", "Rows collected.", ["table"], registry=r
        )
        self.samples_shipped = Counter(
            "fleetscope_agent_samples_shipped_total",
            "Rows ingest acknowledged (202).",
            ["table"],
            registry=r,
        )
        self.batches_shipped = Counter(
            "fleetscope_agent_batches_shipped_total", "Batches acknowledged.", registry=r
        )
        self.batches_dead = Counter(
            "fleetscope_agent_batches_dead_lettered_total",
            "Batches ingest refused as malformed (4xx), moved to the dead-letter folder.",
            registry=r,
        )
        self.batches_dropped = Counter(
            "fleetscope_agent_batches_dropped_total",
            "Batches dropped because the spool reached agent.spool_max_bytes or its disk was full.",
            registry=r,
        )
        self._dropped_seen = 0
        self.spool_depth = Gauge(
            "fleetscope_agent_spool_depth_batches", "Batches waiting in the spool.", registry=r
        )
        self.spool_bytes = Gauge(
            "fleetscope_agent_spool_bytes", "Bytes waiting in the spool.", registry=r
        )
        self.errors = Counter(
            "fleetscope_agent_errors_total", "Errors by kind.", ["kind"], registry=r
        )
        self.last_scrape = Gauge(
            "fleetscope_agent_last_scrape_timestamp_seconds",
            "Unix time of the last successful GPU scrape.",
            registry=r,
        )
        register_process_metrics(r, "agent")

    def record_dropped(self, dropped_since_start: int) -> None:
        """Advance the dropped-batches counter to the spool's running total (a counter only
        goes up; the spool counts, the metric follows it)."""
        if dropped_since_start > self._dropped_seen:
            self.batches_dropped.inc(dropped_since_start - self._dropped_seen)
            self._dropped_seen = dropped_since_start


class MetricsServer:
    """/metrics and /healthz on a daemon thread; `health()` says (ok, reason)."""

    def __init__(
        self,
        metrics: AgentMetrics,
        health: Callable[[], tuple[bool, str]],
        port: int,
        host: str = "0.0.0.0",
    ) -> None:
        registry = metrics.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/metrics"):
                    body, status, ctype = generate_latest(registry), 200, CONTENT_TYPE_LATEST
                elif self.path.startswith("/healthz"):
                    ok, reason = health()
                    body, status, ctype = (reason + "\n").encode(), 200 if ok else 503, "text/plain"
                else:
                    body, status, ctype = b"not found\n", 404, "text/plain"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="agent-metrics", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def freshness_check(
    last_ok: Callable[[], float | None], max_age_s: float, clock: Callable[[], float] = time.time
) -> Callable[[], tuple[bool, str]]:
    """Healthy while the last successful scrape is at most `max_age_s` old."""

    def check() -> tuple[bool, str]:
        last = last_ok()
        if last is None:
            return False, "no successful scrape yet"
        age = clock() - last
        if age > max_age_s:
            return False, f"last successful scrape {age:.0f}s ago"
        return True, "ok"

    return check
