"""`fleetscope profile`: trace a running job on demand and print what its trace says.

    fleetscope profile --job JOB [--rank R] (--steps N | --duration S) [--server URL]
                       [--token T] [--timeout S] [--format table|json]

Posts a profile request to the server (app.profile_client), says which processes the
agents matched, waits until the request is done, failed or expired, and prints the trace summary:
per rank the steps and data-loader share, then every finding (rule id, title, fix, GPU-hours) and
the what-if notes. Exit codes: 0 done; 2 a bad argument; 6 an unknown job; 7 the server cannot
be reached; 9 (ProfileFailedError) no process matched, the profiler, upload or analysis failed,
the request expired, or --timeout passed first. Progress goes to stderr, results to stdout.

Server URL and token default to agent.ingest_url and agent.token. Must never import anything
beyond the standard library and fleetscope core (it runs on laptops and login nodes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fleetscope.errors import ConfigError, ProfileFailedError

if TYPE_CHECKING:
    from fleetscope.settings import Settings

POLL_S = 0.5  # how often the request is read while waiting; a request costs a catalog read


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="Profile a running job on demand and print its trace findings.",
        description="Ask the agents running JOB to record the next steps with torch.profiler, "
        "wait for the trace, and print its analysis (findings such as T8 data-loader stalls).",
    )
    parser.add_argument("--job", required=True, help="job id (as the agents report it)")
    parser.add_argument("--rank", type=int, help="only this rank (default: every rank)")
    amount = parser.add_mutually_exclusive_group(required=True)
    amount.add_argument("--steps", type=_positive_int, help="record this many training steps")
    amount.add_argument("--duration", type=_positive_float, help="record for this many seconds")
    parser.add_argument("--server", help="server URL (default: agent.ingest_url)")
    parser.add_argument("--token", help="bearer token (default: agent.token)")
    parser.add_argument(
        "--timeout", type=_positive_float, default=300.0, help="seconds to wait (default: 300)"
    )
    parser.add_argument("--format", choices=["table", "json"], default="table")
    parser.set_defaults(handler=run_profile)


def run_profile(args: argparse.Namespace, settings: Settings) -> int:
    from app.profile_client import ProfileClient

    if args.rank is not None and args.rank < 0:
        raise ConfigError(f"--rank must be >= 0, got {args.rank}")
    client = ProfileClient(
        args.server or settings.agent.ingest_url,
        args.token if args.token is not None else settings.agent.token,
    )
    request_id = client.create(args.job, rank=args.rank, steps=args.steps, duration_s=args.duration)
    what = f"job {args.job}" + (f" rank {args.rank}" if args.rank is not None else "")
    _note(f"profile request {request_id} for {what}: waiting for an agent to match it")
    request = wait(client.get, request_id, args.timeout, on_match=_print_matched)
    if args.format == "json":
        print(json.dumps(request, indent=2))
    else:
        print(render_request(request))
    if request["state"] != "done":
        raise ProfileFailedError(
            f"profile request {request_id} {request['state']}: {request.get('error')}"
        )
    return 0


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _print_matched(request: dict[str, Any]) -> None:
    _note("matched: " + _matched_text(request) + "; recording")


def _matched_text(request: dict[str, Any]) -> str:
    parts = [
        f"{m.get('host')} pid {m.get('pid')}"
        + (f" rank {m['rank']}" if m.get("rank") is not None else "")
        for m in request.get("matched") or []
    ]
    return ", ".join(parts) or "nothing"


def wait(
    get: Callable[[int], dict[str, Any]],
    request_id: int,
    timeout_s: float,
    *,
    on_match: Callable[[dict[str, Any]], None] = lambda _r: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Read the request until it is finished; ProfileFailedError once `timeout_s` passed."""
    deadline = clock() + timeout_s
    announced = False
    while True:
        request = get(request_id)
        if request.get("matched") and not announced:
            on_match(request)
            announced = True
        if request["state"] in ("done", "failed", "expired"):
            return request
        if clock() >= deadline:
            raise ProfileFailedError(
                f"profile request {request_id} is still {request['state']} after {timeout_s:g} s "
                f"(matched: {_matched_text(request)}); the server keeps it, ask again with "
                f"GET /v1/profile-requests/{request_id}"
            )
        sleep(POLL_S)


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "-"


def render_request(request: dict[str, Any]) -> str:
    """The table format: state, matched processes, and per trace its headline and findings."""
    out = [
        f"profile request {request['id']} for job {request['job_id']}: {request['state']}",
        f"matched: {_matched_text(request)}",
    ]
    if request.get("error"):
        out.append(f"error: {request['error']}")
    for trace in request.get("traces") or []:
        out.append("")
        out.append(
            f"trace {trace['trace_id']} ({trace.get('host')} pid {trace.get('pid')}): "
            f"{trace.get('path')}"
        )
        summary = trace.get("summary")
        if summary is None:
            out.append(
                "  not analyzed (the server runs no trace analysis: add "
                "analyzers.traces.service to server.plugins)"
                if trace.get("state") == "done"
                else f"  {trace.get('state')}"
            )
            continue
        for rank, head in sorted(summary.get("headline", {}).items()):
            mean = head.get("mean_step_ms")
            out.append(
                f"  rank {rank}: {head.get('steps') or 0:.0f} steps, mean step "
                + (f"{mean:.1f} ms" if isinstance(mean, int | float) else "-")
                + f", data loader {_pct(head.get('dataloader_share'))} of step time"
            )
        findings = summary.get("findings") or []
        out.append(f"  findings ({len(findings)}):")
        for finding in findings:
            hours = finding.get("wasted_gpu_hours") or 0.0
            out.append(
                f"  [{finding['rule_id']} {finding['severity']}] {finding['title']}"
                + (f"  (~{hours:.1f} GPU-h/week)" if hours else "")
            )
            out.append(f"      fix: {finding['recommendation']}")
        if not findings:
            out.append("  no antipattern found in the recorded steps")
    return "\n".join(out)
