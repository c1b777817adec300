"""Settings rows of the warehouse: ingest server, storage, catalog, owners and fleet mode
(part of the one table)."""

from __future__ import annotations

from fleetscope.settings.setting import Setting

ROWS: tuple[Setting, ...] = (
    # -- warehouse (ingest server, storage, catalog) ----------------------------------------
    Setting("server.host", "127.0.0.1", "str", "Address the ingest server listens on."),
    Setting("server.port", 8470, "int", "Port of the ingest server."),
    Setting(
        "server.tokens",
        "",
        "str",
        "Comma-separated bearer tokens accepted besides those in the catalog; empty: a random "
        "token generated on first start into <data_dir>/server-token (mode 0600).",
    ),
    Setting(
        "server.read_tokens",
        "",
        "str",
        "Comma-separated read-only bearer tokens: GET /metrics and the read API (GET "
        "/v1/findings, /v1/opportunities, /v1/jobs/<id>) accept them, the ingest routes never do.",
    ),
    Setting("server.max_body_bytes", 64 * 1024 * 1024, "int", "Largest accepted request body."),
    Setting(
        "server.max_decoded_bytes",
        256 * 1024 * 1024,
        "int",
        "Most bytes one Arrow body may decode to (checked before decompressing), else 413.",
    ),
    Setting("server.max_batch_rows", 1_000_000, "int", "Most rows in one Arrow body, else 413."),
    Setting(
        "server.max_inflight_bytes",
        256 * 1024 * 1024,
        "int",
        "Most request-body bytes held by all connections together (at least server.max_body_bytes);"
        " a request that would pass it gets 503 with Retry-After, its body unread.",
    ),
    Setting(
        "server.max_connections",
        256,
        "int",
        "Open connections served at once; past it a new one gets 503 with Retry-After.",
    ),
    Setting(
        "server.header_timeout_s",
        30.0,
        "float",
        "Seconds a connection may take to send a request's headers (idle keep-alive included).",
    ),
    Setting(
        "server.body_timeout_s",
        60.0,
        "float",
        "Seconds a client may take to send a request body before it is answered 408.",
    ),
    Setting("server.tls_cert_file", "", "path", "PEM certificate chain; set with the key: HTTPS."),
    Setting("server.tls_key_file", "", "path", "PEM private key of server.tls_cert_file."),
    Setting(
        "server.read_auth",
        True,
        "bool",
        "Require a bearer token for reads of job data (GET /v1/profile-requests/<id> and "
        "/metrics, whose families carry job and team labels); writes always need one. /healthz "
        "never does.",
    ),
    Setting(
        "warehouse.duckdb_path",
        "",
        "path",
        "Telemetry DuckDB file owned by the writer; empty means <data_dir>/telemetry.duckdb.",
    ),
    Setting(
        "warehouse.segments_dir",
        "",
        "path",
        "Sealed Parquet segments readers use; empty means <data_dir>/segments.",
    ),
    Setting(
        "warehouse.catalog_url",
        "",
        "str",
        "SQLAlchemy URL of the catalog; empty means SQLite at <data_dir>/catalog.sqlite.",
    ),
    Setting(
        "warehouse.flush_interval_s",
        1.0,
        "float",
        "Most seconds the writer gathers batches into one group (one fsync of the ingest log) "
        "before acknowledging them.",
    ),
    Setting(
        "warehouse.log_flush_interval_s",
        1.0,
        "float",
        "Seconds between flushes of the ingest log into Parquet segments and DuckDB: a batch is "
        "acknowledged once in the log, and readable after the next flush (keep it under the 2 s "
        "live-numbers budget).",
    ),
    Setting(
        "warehouse.flush_rows",
        100_000,
        "int",
        "Rows that end a group before its interval, and that trigger a flush of the ingest log "
        "before `log_flush_interval_s`.",
    ),
    Setting(
        "warehouse.raw_retention_days", 14, "int", "Days of raw samples kept; roll-ups stay longer."
    ),
    Setting(
        "warehouse.flush_idle_s",
        0.05,
        "float",
        "Seconds without a new batch after which the writer acknowledges its group.",
    ),
    Setting(
        "warehouse.queue_max_rows",
        1_000_000,
        "int",
        "Rows waiting for the writer before ingest answers 503 with Retry-After.",
    ),
    Setting(
        "warehouse.max_days_per_batch",
        8,
        "int",
        "Most distinct UTC days one batch may hold, else 413 naming this setting (each day is "
        "a partition the writer touches; an agent's batch spans seconds, a spool replay a day).",
    ),
    Setting(
        "warehouse.max_hosts_per_batch",
        10_000,
        "int",
        "Most distinct hosts one batch may hold, else 413 naming this setting (an agent sends "
        "one host; a Prometheus import or remote_write scrape a fleet's worth).",
    ),
    Setting(
        "warehouse.max_record_batches_per_batch",
        1_024,
        "int",
        "Most Arrow record batches in one request's stream, else 413 naming this setting (the "
        "agent sends one; each costs the writer a slice per flush).",
    ),
    Setting(
        "warehouse.commit_timeout_s",
        30.0,
        "float",
        "Seconds a batch request waits for its commit before answering 503 (retry is safe).",
    ),
    Setting(
        "warehouse.maintenance_interval_s",
        60.0,
        "float",
        "Seconds between compaction, roll-up and retention passes in the server.",
    ),
    Setting(
        "warehouse.rollup_interval_s",
        30.0,
        "float",
        "Seconds between roll-up steps over newly published segments, between maintenance "
        "passes: pages read the roll-ups and at most this much raw tail.",
    ),
    Setting(
        "warehouse.compact_target_bytes",
        128 * 1024 * 1024,
        "int",
        "Segments smaller than this are merged per table and day by the compactor.",
    ),
    Setting(
        "warehouse.segment_grace_s",
        300.0,
        "float",
        "Seconds a compacted-away segment stays on disk for readers of the previous manifest.",
    ),
    Setting(
        "server.plugins",
        "*",
        "str",
        "Which server plug-ins (entry points of fleetscope.server) run their setup(server) before "
        "the ingest server starts, comma-separated: * every installed one, a name adds one (an "
        "entry-point name only), -name leaves one out; empty: none.",
    ),
    Setting(
        "server.profile_match_timeout_s",
        15.0,
        "float",
        "Seconds a pending profile request waits for a polling agent to match it before it "
        "fails (3 default agent.profile_poll_s intervals).",
    ),
    Setting(
        "server.profile_run_timeout_s",
        900.0,
        "float",
        "Seconds a matched profile request waits for its traces before it expires.",
    ),
    Setting(
        "server.profile_analysis_lease_s",
        60.0,
        "float",
        "Seconds a server's claim on a stored trace's analysis lasts unrenewed (renewed every "
        "quarter of it while the analysis runs); past it another fleet gateway analyses the trace.",
    ),
    Setting(
        "autoprofile.enabled",
        False,
        "bool",
        "Profile SDK-attached jobs automatically when a trigger rule fires, and periodically "
        "(its server plug-in, analyzers.autoprofile.plugin, must be in server.plugins).",
    ),
    Setting(
        "autoprofile.trigger_rules",
        "P1,R6,R7,R9",
        "str",
        "Comma-separated telemetry rules whose findings request a profile (data-loader stall, "
        "low SM activity, no tensor cores, host-bound / launch-bound).",
    ),
    Setting(
        "autoprofile.gpu_seconds_per_day",
        3600.0,
        "float",
        "Fleet budget of profiled GPU-seconds per day (a profile costs its GPUs x its seconds).",
    ),
    Setting(
        "autoprofile.team_profiles_per_day",
        20,
        "int",
        "Automatic profiles one team may receive per day.",
    ),
    Setting(
        "autoprofile.job_interval_s",
        86400.0,
        "float",
        "Least seconds between two automatic profiles of one job (periodic: one per job per day).",
    ),
    Setting(
        "autoprofile.profile_seconds",
        30.0,
        "float",
        "Seconds one automatic profile is charged per GPU against the daily budget.",
    ),
    Setting(
        "autoprofile.steps",
        5,
        "int",
        "Training steps an automatic profile records.",
    ),
    Setting(
        "autoprofile.periodic",
        True,
        "bool",
        "Also sample every SDK-attached job once per job_interval_s, budget permitting.",
    ),
    Setting(
        "autoprofile.opt_out",
        "",
        "str",
        "Comma-separated job ids, users or teams never profiled automatically.",
    ),
    Setting(
        "autoprofile.tick_s",
        30.0,
        "float",
        "Seconds between two looks at new findings and due periodic profiles.",
    ),
    Setting(
        "server.prometheus_cluster",
        "default",
        "str",
        "Cluster of Prometheus series (remote_write, import) that carry no `cluster` label.",
    ),
    Setting(
        "server.remote_write_hold_s",
        120.0,
        "float",
        "Most seconds a remote_write scrape waits for its remaining series before it is stored "
        "as it is (must exceed Prometheus's scrape interval plus batch_send_deadline).",
    ),
    Setting(
        "server.remote_write_max_series",
        50_000,
        "int",
        "Most series in one remote_write request, else 413 (Prometheus sends at most "
        "max_samples_per_send, default 2000).",
    ),
    Setting(
        "server.remote_write_max_samples",
        200_000,
        "int",
        "Most samples in one remote_write request, else 413.",
    ),
    Setting(
        "server.remote_write_max_samples_per_series",
        10_000,
        "int",
        "Most samples of one series in one remote_write request, else 413.",
    ),
    Setting(
        "server.remote_write_max_labels",
        128,
        "int",
        "Most labels on one remote_write series, else 413.",
    ),
    Setting(
        "server.remote_write_max_label_bytes",
        16 * 1024 * 1024,
        "int",
        "Most bytes of label names and values in one remote_write request, else 413.",
    ),
    # -- owners (issue 13) ---------------------------------------------------------------------
    Setting(
        "agent.slurm_job_dir",
        "/run/fleetscope/slurm-jobs",
        "str",
        "Folder of the Slurm prolog's per-job owner records (<jobid>.env, KEY=VALUE lines); "
        "empty: not read.",
    ),
    Setting(
        "owners.k8s_team_labels",
        "team",
        "str",
        "Comma-separated pod labels naming a Kubernetes job's team, first present wins; "
        "none present: the namespace.",
    ),
    Setting("owners.k8s_user_labels", "user", "str", "Comma-separated pod labels naming the user."),
    Setting(
        "owners.k8s_project_labels",
        "project",
        "str",
        "Comma-separated pod labels naming the project.",
    ),
    # -- fleet mode: Iceberg tables on S3-compatible storage, many gateways ---------------------
    Setting(
        "server.mode",
        "embedded",
        "str",
        "embedded (one process owns a DuckDB file) or fleet (stateless gateway committing to "
        "Iceberg tables; needs warehouse.catalog_url on PostgreSQL and the fleet.* settings).",
    ),
    Setting(
        "fleet.warehouse_uri",
        "s3://fleetscope/warehouse",
        "str",
        "Object-store location of the Iceberg tables' data and metadata files (s3://bucket/prefix).",
    ),
    Setting(
        "fleet.s3_endpoint",
        "",
        "str",
        "S3 endpoint URL (http://host:port for MinIO, Ceph, moto); empty for AWS's own.",
    ),
    Setting(
        "fleet.s3_access_key", "", "str", "S3 access key id; empty uses the AWS default chain."
    ),
    Setting("fleet.s3_secret_key", "", "str", "S3 secret access key."),
    Setting("fleet.s3_region", "us-east-1", "str", "S3 region of the bucket."),
    Setting("fleet.namespace", "fleetscope", "str", "Iceberg namespace holding the tables."),
    Setting(
        "fleet.lease_s",
        30.0,
        "float",
        "Unused since gateways acknowledge on their own ingest log and stage files for one "
        "committer per table (issue 27): no batch claim has a lease any more. Kept so settings "
        "files that set it still load.",
    ),
    Setting(
        "fleet.commit_attempts",
        20,
        "int",
        "Attempts at a table committer's Iceberg commit that conflicts (with the upkeep's "
        "rewrite; gateways never race each other) before its files wait for the next pass.",
    ),
    Setting(
        "fleet.commit_interval_s",
        5.0,
        "float",
        "Seconds between a table committer's commits: every gateway's staged data files of a "
        "table go into the Iceberg table in one append this often (readers see staged files "
        "before that).",
    ),
    Setting(
        "fleet.gateway_name",
        "",
        "str",
        "This gateway's name: its ingest log is <core.data_dir>/gateway-log/<name>/, replayed "
        "when a gateway of that name starts again. Empty: <hostname>-<port>.",
    ),
    Setting(
        "fleet.ledger_margin_days",
        1,
        "int",
        "Days a batch id stays in the shared ledger beyond warehouse.raw_retention_days; fleet "
        "upkeep forgets older ids (a copy of a forgotten batch is stored again, into days raw "
        "retention drops). The margin covers retention running late and agents' clock skew.",
    ),
)
