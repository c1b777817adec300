"""What a profile request past a timeout becomes (warehouse.profiling.service's sweep judges when).

    pending past server.profile_match_timeout_s   failed, naming what every polling agent runs
    running, no progress for server.profile_run_timeout_s, a process still owing its trace
        nothing being analysed                    expired, each late process failed with why
        a stored trace being analysed             running on, the late processes failed; it
                                                  settles when that analysis finishes

A process whose trace is stored (`analyzing`) is never timed out: some server analyses it, the one
that stored it or one that took over its lapsed lease (warehouse.profiling.analysis_leases), so a request
does not expire merely because the server analysing its trace stopped or the analysis is long.
Must never change the catalog itself (the sweep writes what this returns on the locked row).
"""

from __future__ import annotations

from typing import Any

from warehouse.catalog.profiling import ProfileRequest
from warehouse.profiling.agent_registry import AgentRegistry, describe_agents

# Why a process that had not delivered its trace at the run timeout failed, by the state it was
# left in: `uploading`, its trace arrived and the server storing it stopped (a fleet gateway
# killed while storing it; no other server redoes that, the agent's retry is answered 409).
LEFT_IN = {
    "running": "no trace arrived",
    "uploading": "its trace was never stored: the server receiving it stopped",
}


def owes_trace(request: ProfileRequest) -> bool:
    """A matched process has not delivered its trace (the run timeout's business)."""
    return any(e.get("state") in LEFT_IN for e in request.matched or [])


def timed_out(
    request: ProfileRequest, match_timeout_s: float, run_timeout_s: float, registry: AgentRegistry
) -> dict[str, Any]:
    """The changes of a request past its timeout (the table above)."""
    if request.state == "pending":
        return {"state": "failed", "error": no_match(request, match_timeout_s, registry)}
    within = f"within {run_timeout_s:g} s (server.profile_run_timeout_s)"
    late = [e for e in request.matched or [] if e.get("state") in LEFT_IN]
    why = {id(e): LEFT_IN[e["state"]] for e in late}
    analysing = any(e.get("state") == "analyzing" for e in request.matched or [])
    if analysing:
        why = {key: f"{text} {within}" for key, text in why.items()}
    matched = [
        {**e, "state": "failed", "error": why[id(e)]} if id(e) in why else e
        for e in request.matched or []
    ]
    if analysing:
        return {"matched": matched}
    waiting = ", ".join(f"{e['host']} pid {e['pid']}" for e in late if e["state"] == "running")
    errors = [f"no trace from {waiting} {within}: the process may have stopped stepping"]
    errors = errors if waiting else []
    errors += [f"{e['host']} pid {e['pid']}: {why[id(e)]}" for e in late if e["state"] != "running"]
    return {"state": "expired", "matched": matched, "error": "; ".join(errors)}


def no_match(request: ProfileRequest, match_timeout_s: float, registry: AgentRegistry) -> str:
    what = f"job {request.job_id}" + (f" rank {request.rank}" if request.rank is not None else "")
    since = request.created.timestamp() - match_timeout_s
    agents = registry.recent(since)
    if not agents:
        seen = "no agent polled meanwhile (is a fleetscope-agent with agent.profile_poll_s > 0 "
        seen += "shipping to this server?)"
    else:
        seen = "agents polling: " + describe_agents(agents)
    return (
        f"no processes matched {what} within {match_timeout_s:g} s "
        f"(server.profile_match_timeout_s); {seen}"
    )
