"""The read API's OpenAPI 3.0 document, served at GET /v1/openapi.json (no token needed: it names
no job). Written by hand next to the routes it describes; tests/analyzers/test_read_api.py
validates it with openapi-spec-validator and checks every route here is served and every served
route is here."""

from __future__ import annotations

from typing import Any

from fleetscope import __version__


def _param(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema}  # fmt: skip


_STR = {"type": "string"}
WINDOW = _param("window", "Length of the window ending at `end`: 90s, 30m, 12h, 7d, 2w.",
                {"type": "string", "default": "7d", "pattern": r"^\d+(\.\d+)?[smhdw]$"})  # fmt: skip
END = _param("end", "End of the window, ISO 8601 (default: now, UTC).",
             {"type": "string", "format": "date-time"})  # fmt: skip
TEAM = _param("team", "Only this team's findings.", _STR)
CLUSTER = _param("cluster", "Only findings on this cluster (the job's, else the host's).", _STR)
RULE = _param("rule", "Only this rule's findings (R1, P2, ...).", _STR)
STATE = _param("state", "Findings in this state; suppressed ones only when asked for.",
               {"type": "string", "enum": ["open", "acknowledged", "suppressed", "all"],
                "default": "open"})  # fmt: skip
LIMIT = _param("limit", "Page size.",
               {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100})  # fmt: skip
OFFSET = _param("offset", "Items to skip (the previous page's next_offset).",
                {"type": "integer", "minimum": 0, "default": 0})  # fmt: skip
BY = _param("by", "Group the ranking by.",
            {"type": "string", "enum": ["team", "user", "job", "model"], "default": "team"})  # fmt: skip
TOP = _param("top", "Lines in by_group and top_jobs.",
             {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10})  # fmt: skip

_NULLABLE_STR = {"type": "string", "nullable": True}
_TIME = {"type": "string", "format": "date-time", "nullable": True}
FINDING = {
    "type": "object",
    "required": ["finding_id", "rule_id", "severity", "state", "wasted_gpu_hours"],
    "properties": {
        "finding_id": _STR,
        "rule_id": _STR,
        "severity": {"type": "string", "enum": ["info", "warn", "critical"]},
        "state": {"type": "string", "enum": ["open", "acknowledged", "suppressed"]},
        "title": _STR,
        "job_id": _NULLABLE_STR,
        "job_name": _NULLABLE_STR,
        "user": _NULLABLE_STR,
        "team": _NULLABLE_STR,
        "cluster": _NULLABLE_STR,
        "host": _NULLABLE_STR,
        "gpus": {"type": "array", "items": _STR},
        "window_start": _TIME,
        "window_end": _TIME,
        "wasted_gpu_hours": {"type": "number", "minimum": 0},
        "estimate_method": _STR,
        "recommendation": _STR,
        "evidence": {"type": "object", "additionalProperties": True},
        "first_seen": _TIME,
        "last_seen": _TIME,
    },
}
LINE = {
    "type": "object",
    "properties": {
        "key": _STR,
        "gpu_hours": {"type": "number"},
        "findings": {"type": "integer"},
        "jobs": {"type": "array", "items": _STR},
        "rules": {"type": "object", "additionalProperties": {"type": "number"}},
    },
}
ERROR = {"type": "object", "required": ["error"], "properties": {"error": _STR}}


def _answers(schema: str, *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "200": {"description": "OK", "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{schema}"}}}},
    }  # fmt: skip
    texts = {400: "A bad query parameter", 401: "No valid token",
             403: "An agent's ingest token (use a read token)", 404: "Unknown job"}  # fmt: skip
    for status in (400, 401, 403, *errors):
        out[str(status)] = {"description": texts[status], "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"}}}}  # fmt: skip
    return out


def document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "fleetscope read API",
            "version": __version__,
            "description": "Findings, the recoverable GPU-hours ranking and jobs, read from the "
            "fleetscope catalog. Bearer token: one of server.read_tokens (or server.tokens).",
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/findings": {
                "get": {
                    "summary": "Findings overlapping the window, most wasted GPU-hours first",
                    "operationId": "listFindings",
                    "parameters": [WINDOW, END, TEAM, CLUSTER, RULE, STATE, LIMIT, OFFSET],
                    "responses": _answers("FindingPage"),
                }
            },
            "/v1/opportunities": {
                "get": {
                    "summary": "Recoverable GPU-hours by rule, by group and top jobs (a job counted "
                    "once)",
                    "operationId": "getOpportunities",
                    "parameters": [WINDOW, END, TEAM, CLUSTER, RULE, BY, TOP],
                    "responses": _answers("Opportunities"),
                }
            },
            "/v1/jobs/{job_id}": {
                "get": {
                    "summary": "One job: its record, GPUs, findings and recoverable GPU-hours",
                    "operationId": "getJob",
                    "parameters": [
                        {"name": "job_id", "in": "path", "required": True, "schema": _STR},
                        WINDOW,
                        END,
                        RULE,
                        STATE,
                    ],
                    "responses": _answers("Job", 404),
                }
            },
            "/v1/jobs/{job_id}/summary": {
                "get": {
                    "summary": "The job's compact summary, what Slurm's AdminComment keeps "
                    "(FS1: + base64(gzip(this JSON)))",
                    "operationId": "getJobSummary",
                    "parameters": [
                        {"name": "job_id", "in": "path", "required": True, "schema": _STR}
                    ],
                    "responses": _answers("JobSummary", 404),
                }
            },
            "/v1/openapi.json": {
                "get": {
                    "summary": "This document",
                    "operationId": "getOpenApi",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "OK",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": ERROR,
                "Finding": FINDING,
                "FindingPage": {
                    "type": "object",
                    "required": ["items", "total", "limit", "offset", "next_offset"],
                    "properties": {
                        "items": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Finding"},
                        },
                        "total": {"type": "integer"},
                        "limit": {"type": "integer"},
                        "offset": {"type": "integer"},
                        "next_offset": {"type": "integer", "nullable": True},
                    },
                },
                "Line": LINE,
                "Opportunities": {
                    "type": "object",
                    "properties": {
                        "window": _STR,
                        "start": _TIME,
                        "end": _TIME,
                        "group_by": _STR,
                        "total_gpu_hours": {"type": "number"},
                        **{
                            key: {"type": "array", "items": {"$ref": "#/components/schemas/Line"}}
                            for key in ("by_rule", "by_group", "top_jobs")
                        },
                    },
                },
                "JobSummary": {
                    "type": "object",
                    "required": ["v", "job_id", "gpus", "recoverable_gpu_hours", "findings"],
                    "properties": {
                        "v": {"type": "integer", "enum": [1]},
                        "job_id": _STR,
                        "gpus": {"type": "array", "items": _STR},
                        "recoverable_gpu_hours": {"type": "number"},
                        "findings": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "rule": _STR,
                                    "severity": _STR,
                                    "gpu_hours": {"type": "number"},
                                    "title": _STR,
                                },
                            },
                        },
                    },
                },
                "Job": {
                    "type": "object",
                    "required": ["job_id", "gpus", "findings", "recoverable_gpu_hours"],
                    "properties": {
                        **{
                            k: _NULLABLE_STR
                            for k in ("cluster", "user", "team", "name", "model", "scheduler")
                        },
                        "job_id": _STR,
                        "start": _TIME,
                        "end": _TIME,
                        "gpus": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "host": _STR,
                                    "gpu_index": {"type": "integer"},
                                    "gpu_uuid": _NULLABLE_STR,
                                    "mig_profile": _NULLABLE_STR,
                                    "first_ts": _TIME,
                                    "last_ts": _TIME,
                                },
                            },
                        },
                        "recoverable_gpu_hours": {"type": "number"},
                        "findings": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Finding"},
                        },
                    },
                },
            },
        },
    }
