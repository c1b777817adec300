"""dcgm-exporter scrape: GET /metrics, parse, normalize.

Must never: keep more than the last page's parse (for `check`), or retry within one scrape (the
next interval is the retry).
"""

from __future__ import annotations

from collector.exposition import ExpositionParser, Page
from collector.http import Transport, UrllibTransport
from collector.normalize import GpuReading, normalize_samples
from fleetscope.errors import SourceUnavailableError


def fetch_text(transport: Transport, url: str, timeout_s: float) -> str:
    """The page at `url` as text; SourceUnavailableError on no answer or a non-200 status."""
    resp = transport.request("GET", url, headers={"Accept": "text/plain"}, timeout_s=timeout_s)
    if resp.status != 200:
        raise SourceUnavailableError(f"GET {url}: HTTP {resp.status}")
    return resp.body.decode("utf-8", errors="replace")


class DcgmSource:
    def __init__(
        self,
        url: str,
        *,
        cluster: str,
        host: str | None = None,
        transport: Transport | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.url = url
        self.cluster = cluster
        self.host = host or None
        self.transport = transport or UrllibTransport()
        self.timeout_s = timeout_s
        self.parser = ExpositionParser()
        self.last_page: Page | None = None

    def read(self, ts_ms: int) -> list[GpuReading]:
        text = fetch_text(self.transport, self.url, self.timeout_s)
        page = self.parser.parse(text)
        self.last_page = page
        return normalize_samples(page.samples, ts_ms=ts_ms, cluster=self.cluster, host=self.host)
