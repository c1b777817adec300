"""dcgm-exporter scrape: GET /metrics, then page text -> readings (collector.dcgm_scan).

Must never: keep pages between scrapes (the scanner keeps only validated line prefixes), or retry
within one scrape (the next interval is the retry).
"""

from __future__ import annotations

from collector.dcgm_scan import DcgmScanner
from collector.http import Transport, UrllibTransport
from fleetscope.errors import SourceUnavailableError
from fleetscope.normalize import GpuReading


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
        self.scanner = DcgmScanner()

    def read(self, ts_ms: int) -> list[GpuReading]:
        text = fetch_text(self.transport, self.url, self.timeout_s)
        return self.scanner.scan(text, ts_ms=ts_ms, cluster=self.cluster, host=self.host)
