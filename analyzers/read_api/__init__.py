"""The read API: findings, opportunities and jobs over HTTP, for the tools beside fleetscope.

A server plug-in (`analyzers.read_api` in `server.plugins`, on by default, both modes): its
`setup(server)` adds these routes to the server's (warehouse.ingest.plugin_host PluginHost.routes):

    GET /v1/findings          ?window&end&team&cluster&rule&state&limit&offset -> a page
    GET /v1/opportunities     ?window&end&team&cluster&rule&by&top -> the ranking
    GET /v1/jobs/<job_id>     ?window&end&rule&state -> the job, its GPUs and findings
    GET /v1/jobs/<job_id>/summary  the compact summary Slurm's AdminComment keeps (summary.py)
    GET /v1/openapi.json      the OpenAPI 3.0 document (no token)

JSON in, JSON out; a bad parameter is a 400 naming it, an unknown job a 404. Tokens: one of
`server.read_tokens` or `server.tokens`; an agent's catalog token gets 403 (analyzers.read_api.access).
The answers are views.py's, from the catalog alone, but the summary's GPU use, read from the job's
samples (warehouse.read.window_reader): the same in embedded and fleet mode.
"""

from __future__ import annotations

import re
from typing import Any

from analyzers.read_api import params as p
from analyzers.read_api.access import ReadAccess
from analyzers.read_api.openapi import document
from analyzers.read_api.views import (
    STATES,
    Filters,
    finding_json,
    job_json,
    opportunities_json,
    paged,
    rows,
)

PLUGIN_ORDER = 42  # fleetscope.plugins: after the exporter, before the closed profiling loop
SERVER_MODES = ("embedded", "fleet")

FINDINGS = frozenset({"window", "end", "team", "cluster", "rule", "state", "limit", "offset"})
OPPORTUNITIES = frozenset({"window", "end", "team", "cluster", "rule", "by", "top"})
JOB = frozenset({"window", "end", "rule", "state"})
GROUPS = ("team", "user", "job", "model")


def setup(server: Any) -> None:
    from fleetscope.errors import IngestError
    from warehouse.ingest.response import Response

    access = ReadAccess(server.auth)  # its read tokens: server.read_tokens
    catalog = server.catalog

    def filters(params: dict[str, str], **fixed: Any) -> Filters:
        return Filters(
            window=p.window(params),
            team=params.get("team") or None,
            cluster=params.get("cluster") or None,
            rule=params.get("rule") or None,
            state=p.choice(params, "state", STATES, "open"),
            **fixed,
        )

    def get_findings(handler: Any, _ingest: Any) -> Response:
        access.check(handler.headers.get("Authorization"))
        params = p.query_params(handler.path, FINDINGS)
        page = p.page(params)
        found = [finding_json(r) for r in rows(catalog, filters(params))]
        return Response.json(200, paged(found, page))

    def get_opportunities(handler: Any, _ingest: Any) -> Response:
        access.check(handler.headers.get("Authorization"))
        params = p.query_params(handler.path, OPPORTUNITIES)
        by = p.choice(params, "by", GROUPS, "team")
        top = p.page({"limit": params.get("top", "10")}).limit
        return Response.json(200, opportunities_json(catalog, filters(params), by, top))

    def get_job(handler: Any, _ingest: Any, quoted_id: str) -> Response:
        import urllib.parse

        access.check(handler.headers.get("Authorization"))
        job_id = urllib.parse.unquote(quoted_id)
        params = p.query_params(handler.path, JOB)
        params.setdefault("window", "3650d")  # a job's whole history unless asked otherwise
        found = job_json(catalog, job_id, filters(params, job_id=job_id))
        if found is None:
            raise IngestError(f"no job {job_id!r} in the catalog", status=404)
        return Response.json(200, found)

    def get_summary(handler: Any, _ingest: Any, quoted_id: str) -> Response:
        import urllib.parse

        from analyzers.read_api.summary import gpu_use, summary
        from warehouse.read.window_reader import open_job

        access.check(handler.headers.get("Authorization"))
        job_id = urllib.parse.unquote(quoted_id)
        p.query_params(handler.path, frozenset())
        found = job_json(catalog, job_id, filters({"window": "3650d"}, job_id=job_id))
        if found is None:
            raise IngestError(f"no job {job_id!r} in the catalog", status=404)
        conn = open_job(server.settings, job_id)  # its GPU use, from its samples, either mode
        try:
            use = gpu_use(conn, job_id)
        finally:
            conn.close()
        return Response.json(200, summary(found, use))

    def get_openapi(_handler: Any, _ingest: Any) -> Response:
        return Response.json(200, document())

    server.routes.extend(
        [
            ("GET", re.compile(r"/v1/findings"), "read_findings", get_findings),
            ("GET", re.compile(r"/v1/opportunities"), "read_opportunities", get_opportunities),
            ("GET", re.compile(r"/v1/jobs/([^/]+)"), "read_job", get_job),
            ("GET", re.compile(r"/v1/jobs/([^/]+)/summary"), "read_job_summary", get_summary),
            ("GET", re.compile(r"/v1/openapi\.json"), "read_openapi", get_openapi),
        ]
    )
