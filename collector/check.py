"""`fleetscope-agent check`: what an operator needs to know before trusting this host's data.

Checks, each a line with OK / WARN / FAIL:
  exporter     reachable, parsable, how many GPUs; SM_ACTIVE / SM_OCCUPANCY / tensor / DRAM / FP
               pipes present? If not, prints the dcgm-exporter counters CSV lines that enable them
               (dcgm-exporter's default CSV ships them commented out).
  ingest       reachable; the token accepted (an empty gpu_samples batch must get 202)
  attribution  which sources exist on this host and what they name

Must never: change anything on the host or in ingest beyond that one empty batch.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

from collector.attribution import build_resolver
from collector.http import Transport, UrllibTransport
from collector.shipper import split_urls
from fleetscope.contract import (
    ARROW_STREAM_MEDIA_TYPE,
    GPU_SAMPLES,
    HEADER_AGENT,
    HEADER_BATCH_ID,
    HEADER_SCHEMA_VERSION,
    SCHEMA_VERSION,
    to_ipc,
)
from fleetscope.dcgm_fields import PROFILING_FIELDS
from fleetscope.errors import ContractError, SourceUnavailableError
from fleetscope.normalize import GpuReading
from fleetscope.settings import Settings


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    ok: bool = True

    def add(self, level: str, what: str) -> None:
        self.lines.append(f"{level:<4} {what}")
        if level == "FAIL":
            self.ok = False

    def text(self) -> str:
        return "\n".join(self.lines)


def check_exporter(settings: Settings, report: Report, transport: Transport) -> list[GpuReading]:
    from collector.sources.dcgm import DcgmSource

    url = settings.agent.dcgm_url
    if not url:
        report.add("WARN", "exporter: agent.dcgm_url is empty; the agent will use NVML")
        return []
    source = DcgmSource(
        url,
        cluster=settings.agent.cluster,
        host=settings.agent.host or None,
        transport=transport,
        timeout_s=settings.agent.scrape_timeout_s,
    )
    try:
        readings = source.read(0)
    except SourceUnavailableError as exc:
        report.add("FAIL", f"exporter: unreachable: {exc}")
        return []
    except ContractError as exc:
        report.add("FAIL", f"exporter: page cannot be parsed: {exc}")
        return []
    report.add("OK", f"exporter: {url} answers; {len(readings)} GPUs or MIG instances")
    missing = [
        column
        for column in PROFILING_FIELDS
        if not any(r.row.get(column) is not None for r in readings)
    ]
    if missing:
        report.add("WARN", "exporter: profiling fields missing: " + ", ".join(missing))
        report.lines.append(
            "     add these lines to the dcgm-exporter counters CSV (-f / --collectors), "
            "then restart it:"
        )
        report.lines += ["     " + PROFILING_FIELDS[c] for c in missing]
    else:
        report.add("OK", "exporter: SM_ACTIVE, SM_OCCUPANCY, tensor, DRAM and FP pipes enabled")
    return readings


def check_ingest(settings: Settings, report: Report, transport: Transport) -> None:
    base = split_urls(settings.agent.ingest_url)[0]
    try:
        transport.request("GET", base + "/healthz", timeout_s=5.0)
    except SourceUnavailableError as exc:
        report.add("FAIL", f"ingest: unreachable: {exc}")
        return
    report.add("OK", f"ingest: {base} answers")
    empty = GPU_SAMPLES.empty_table()
    headers = {
        "Content-Type": ARROW_STREAM_MEDIA_TYPE,
        HEADER_SCHEMA_VERSION: str(SCHEMA_VERSION),
        HEADER_BATCH_ID: uuid.uuid4().hex,
        HEADER_AGENT: settings.agent.host or os.uname().nodename,
    }
    token = settings.agent.token
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        resp = transport.request(
            "POST", base + "/v1/batches/gpu_samples", body=to_ipc(empty), headers=headers
        )
    except SourceUnavailableError as exc:
        report.add("FAIL", f"ingest: batch POST failed: {exc}")
        return
    if resp.status == 202:
        report.add("OK", "ingest: token accepted")
    elif resp.status in (401, 403):
        report.add("FAIL", f"ingest: token refused (HTTP {resp.status}); set agent.token")
    else:
        body = resp.body[:200].decode("utf-8", "replace")
        report.add("FAIL", f"ingest: empty batch answered HTTP {resp.status}: {body}")


def check_attribution(settings: Settings, report: Report, readings: list[GpuReading]) -> None:
    resolver = build_resolver(settings)
    names = [s.name for s in resolver.sources]
    report.add("OK", "attribution: sources in precedence order: " + ", ".join(names))
    for key, value in (
        ("agent.attribution_override", settings.agent.attribution_override),
        ("agent.job_mapping_dir", settings.agent.job_mapping_dir),
    ):
        if value and not os.path.exists(value):
            report.add("WARN", f"attribution: {key} = {value} does not exist")
    if readings:
        resolver.resolve(readings)
        for r in readings:
            row = r.row
            where = f"gpu {row['gpu_index']}" + (
                f" mig {row['mig_instance_id']}" if row["mig_instance_id"] is not None else ""
            )
            job = row["job_id"] or "(no job)"
            report.lines.append(f"     {where}: {job} [{row['attribution'] or '-'}]")


def run_checks(settings: Settings, transport: Transport | None = None) -> Report:
    transport = transport or UrllibTransport(settings.agent.tls_ca_file)
    report = Report()
    readings = check_exporter(settings, report, transport)
    check_ingest(settings, report, transport)
    check_attribution(settings, report, readings)
    return report
