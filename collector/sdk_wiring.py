"""Connects the training-process SDK to a running agent: step metrics in, profile requests out.

`attach_sdk(agent, settings)` binds the SDK socket (agent.sdk_socket) with a StepReceiver, adds
its step rows to every tick as `step_samples` (same batcher, spool and shipper as GPU rows, so the
same exactly-once delivery), and, when agent.profile_poll_s > 0, runs the ProfileRelay as an agent
worker. Step rows and polls carry the agent's host name: agent.host, else the host the GPU source
reports (dcgm-exporter's Hostname label), else the machine's name, so step_samples and
gpu_samples of one host agree.

Separate from `build_agent` so that building an agent (tests, `check`) never binds a socket.
Must never let a training process's bad datagram stop a tick (the receiver drops it).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from collector.agent import Agent
from collector.http import KeepAliveTransport, Transport
from collector.profile_relay import ProfileRelay
from collector.sdk.receiver import StepReceiver
from collector.shipper import split_urls
from collector.trace_uploader import TraceUploader
from fleetscope.errors import ConfigError
from fleetscope.settings import Settings


class SdkSteps:
    """A RowSource: the step rows the receiver holds, stamped with the agent's current host."""

    table = "step_samples"

    def __init__(self, receiver: StepReceiver, host: Callable[[], str]) -> None:
        self.receiver = receiver
        self.host = host

    def drain(self) -> list[dict[str, object]]:
        if not self.receiver.pending_steps:  # most ticks: building an empty table costs more
            return []
        self.receiver.host = self.host()
        rows: list[dict[str, object]] = self.receiver.drain_steps().to_pylist()
        return rows


def trace_dir(settings: Settings) -> Path:
    """agent.trace_dir, else `traces/` next to the SDK socket (the SDK can write there)."""
    if settings.agent.trace_dir:
        return settings.path(settings.agent.trace_dir)
    return settings.path(settings.agent.sdk_socket).parent / "traces"


def attach_sdk(
    agent: Agent, settings: Settings, *, transport: Transport | None = None
) -> StepReceiver:
    """Bind the SDK socket and wire steps and profiling into `agent`; returns the receiver."""
    configured = settings.agent.host

    def host() -> str:
        return configured or agent.last_gpu_host or socket.gethostname()

    path = settings.path(settings.agent.sdk_socket)
    try:
        receiver = StepReceiver(path, host=host(), cluster=settings.agent.cluster).start()
    except OSError as exc:  # a folder we cannot write, or a path over the 107-byte socket limit
        raise ConfigError(f"agent.sdk_socket: cannot bind {path}: {exc}") from exc
    agent.closers.append(receiver.stop)
    agent.row_sources.append(SdkSteps(receiver, host))
    poll_s = settings.agent.profile_poll_s
    if poll_s > 0:
        transport = transport or KeepAliveTransport(settings.agent.tls_ca_file)
        folder = trace_dir(settings)
        folder.mkdir(parents=True, exist_ok=True)
        relay = ProfileRelay(
            receiver,
            ingest_url=split_urls(settings.agent.ingest_url)[0],
            token=settings.agent.token,
            host=host,
            transport=transport,
            trace_dir=folder,
            poll_interval_s=poll_s,
            uploader=TraceUploader(
                ingest_url=split_urls(settings.agent.ingest_url)[0],
                token=settings.agent.token,
                transport=transport,
                metrics=agent.metrics,
                report=lambda request_id, pid, error: relay.report(request_id, pid, error),
                backoff_cap_s=settings.agent.backoff_max_s,
            ),
            metrics=agent.metrics,
            timeout_s=settings.agent.ingest_timeout_s,
        )
        agent.workers.append(relay.run)
    return receiver
