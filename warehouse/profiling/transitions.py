"""The state changes of a profile request as conditional updates in the catalog, so that any number
of servers (fleet gateways) sharing one catalog apply them as a single server would.

Each change is one catalog transaction that reads the request row with `SELECT ... FOR UPDATE`
(PostgreSQL holds the row until commit; a second gateway's change of the same request waits, then
reads the row as the first left it), checks that the state it expects still holds, and writes.
A change whose expectation no longer holds does nothing and says so (False), and the caller
answers as it would have had it come second on one server. One row is locked per transaction, so
transactions cannot deadlock. SQLite (the embedded catalog) ignores FOR UPDATE: there the
ProfilingService's in-process lock is what serialises changes.

A matched process's entry moves: running -> uploading (its trace is being stored; claimed before
the body is written so two copies of one upload cannot both be stored) -> analyzing (stored and
recorded) -> done | failed; running -> failed (agent report, corrupt or oversized trace);
uploading -> running (storing failed: the agent may retry). An `analyzing` entry also says which
server analyses its trace and until when (warehouse.profiling.analysis_leases), so that a trace whose
analyser stopped is analysed by another, once. Must never read or store a trace.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from fleetscope.errors import NotFoundError
from warehouse.catalog.profiling import ProfileRequest, profile_requests, update_profile_request
from warehouse.profiling.agent_registry import ReportedProcess

FINISHED = frozenset({"done", "failed"})
OPEN = ("pending", "running")


def get_request(conn: Connection, request_id: int, *, lock: bool = False) -> ProfileRequest:
    """The request; with `lock`, its row stays locked until the transaction ends."""
    query = select(profile_requests).where(profile_requests.c.id == request_id)
    if lock:
        query = query.with_for_update()
    row = conn.execute(query).mappings().first()
    if row is None:
        raise NotFoundError(f"no profile request {request_id}")
    return ProfileRequest(**row)


def open_requests(conn: Connection) -> list[ProfileRequest]:
    """Pending and running requests, read without locks (callers lock the ones they change)."""
    query = (
        select(profile_requests)
        .where(profile_requests.c.state.in_(OPEN))
        .order_by(profile_requests.c.id)
    )
    return [ProfileRequest(**row) for row in conn.execute(query).mappings()]


def entry(request: ProfileRequest, host: str, pid: int) -> dict[str, Any] | None:
    for item in request.matched or []:
        if (item.get("host"), item.get("pid")) == (host, pid):
            return dict(item)
    return None


def serves(
    request: ProfileRequest, host: str, processes: Sequence[ReportedProcess], join_after: datetime
) -> list[ReportedProcess]:
    """The processes of `host` that `request` may be handed to now: a pending request's, or a
    running rank-less one's younger than the match timeout that `host` has not joined yet."""
    if request.state not in OPEN:
        return []
    if request.state == "running" and (
        request.rank is not None
        or request.created < join_after
        or any(e["host"] == host for e in request.matched or [])
    ):
        return []
    return [
        p
        for p in processes
        if p.job_id == request.job_id and (request.rank is None or p.rank == request.rank)
    ]


def match(
    conn: Connection,
    request_id: int,
    host: str,
    processes: Sequence[ReportedProcess],
    join_after: datetime,
) -> tuple[ProfileRequest, list[ReportedProcess]] | None:
    """Hand the request to `host`'s processes if it still may be (checked on the locked row)."""
    request = get_request(conn, request_id, lock=True)
    found = serves(request, host, processes, join_after)
    if not found:
        return None
    matched = list(request.matched or [])
    matched += [{"host": host, "pid": p.pid, "rank": p.rank, "state": "running"} for p in found]
    update_profile_request(
        conn, request_id, state="running", matched=matched, host=request.host or host
    )
    return request, found


def set_process(
    conn: Connection,
    request_id: int,
    host: str,
    pid: int,
    expect: Collection[str],
    *,
    held_by: str | None = None,
    touch: bool = True,
    **changes: Any,
) -> bool:
    """Change one matched process's entry if the request runs, the entry's state is one of
    `expect` and, given `held_by`, that server holds the entry's analysis (warehouse.
    analysis_leases); settle the request once every process finished. False when nothing
    changed. `touch=False` keeps the request's `updated` (a lease renewal is no progress)."""
    request = get_request(conn, request_id, lock=True)
    current = entry(request, host, pid)
    if request.state != "running" or current is None or current.get("state") not in expect:
        return False
    if held_by is not None and current.get("analyser") != held_by:
        return False
    matched = [
        {**e, **changes} if (e["host"], e["pid"]) == (host, pid) else e
        for e in request.matched or []
    ]
    fields: dict[str, Any] = {"matched": matched}
    if changes.get("trace_id") and not request.trace_id:
        fields["trace_id"] = changes["trace_id"]
    if all(e.get("state") in FINISHED for e in matched):
        errors = [f"{e['host']} pid {e['pid']}: {e['error']}" for e in matched if e.get("error")]
        done = any(e.get("state") == "done" for e in matched)
        fields["state"] = "done" if done else "failed"
        fields["error"] = "; ".join(errors) or None
    update_profile_request(conn, request_id, touch=touch, **fields)
    return True


def settle_timeout(
    conn: Connection, request_id: int, match_before: datetime, run_before: datetime
) -> ProfileRequest | None:
    """The locked request if it is still past a timeout (pending past `match_before`, running
    without progress since `run_before`), for the caller to fail or expire; None otherwise."""
    request = get_request(conn, request_id, lock=True)
    if request.state == "pending" and request.created < match_before:
        return request
    if request.state == "running" and request.updated < run_before:
        return request
    return None
