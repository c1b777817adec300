"""Settings as data: one table drives the TOML loader, environment overrides, `config show` and docs.

Precedence, lowest first: the default in `SETTINGS`, the TOML file, the environment variable
(`FLEETSCOPE_` + the key upper-cased with dots as underscores: `agent.interval_s` is
`FLEETSCOPE_AGENT_INTERVAL_S`). The TOML file is `--config PATH`, else `$FLEETSCOPE_CONFIG`, else
`./fleetscope.toml` when it exists. Keys are `section.name`; in TOML they are written as tables
(`[agent]` then `interval_s = 1.0`).

Every stage adds its keys to the one table below, in its own section. Never read `os.environ`
elsewhere for configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SettingType = Literal["str", "int", "float", "bool", "path"]
Source = Literal["default", "file", "env"]


@dataclass(frozen=True)
class Setting:
    key: str
    default: str | int | float | bool
    type: SettingType
    help: str

    @property
    def env(self) -> str:
        return "FLEETSCOPE_" + self.key.upper().replace(".", "_")


SETTINGS: tuple[Setting, ...] = (
    # -- core ------------------------------------------------------------------------------
    Setting("core.data_dir", "var", "path", "Root folder for every file fleetscope writes."),
    Setting("core.log_level", "INFO", "str", "Python logging level for every process."),
    # -- collector (agent on each GPU host) ------------------------------------------------
    Setting(
        "agent.dcgm_url",
        "http://127.0.0.1:9400/metrics",
        "str",
        "dcgm-exporter /metrics URL to scrape; empty to use NVML instead.",
    ),
    Setting(
        "agent.node_exporter_url",
        "",
        "str",
        "Optional node_exporter /metrics URL used as the host source instead of psutil.",
    ),
    Setting(
        "agent.interval_s",
        10.0,
        "float",
        "Seconds between scrapes (dcgm-exporter collects every 30 s by default; 1-10 s is common).",
    ),
    Setting(
        "agent.host_interval_s",
        5.0,
        "float",
        "Seconds between host metric reads (psutil or node_exporter); at least agent.interval_s.",
    ),
    Setting(
        "agent.ingest_url",
        "http://127.0.0.1:8470",
        "str",
        "Base URL of the ingest server; in fleet mode a comma-separated list of gateways (the "
        "agent fails over to the next on no answer or a 5xx) or one load-balanced URL.",
    ),
    Setting("agent.token", "", "str", "Bearer token this agent presents to ingest."),
    Setting(
        "agent.host", "", "str", "Host name to report; empty uses the exporter label or hostname."
    ),
    Setting("agent.cluster", "default", "str", "Cluster name stamped on every sample."),
    Setting("agent.batch_max_rows", 5000, "int", "Most rows in one shipped batch."),
    Setting(
        "agent.ship_interval_s", 5.0, "float", "Most seconds a sample waits before it is shipped."
    ),
    Setting(
        "agent.spool_dir",
        "/var/lib/fleetscope/spool",
        "path",
        "Folder of the on-disk spool kept while ingest is down (absolute: the agent runs with a "
        "read-only root and working directory /; a declared volume in deploy/).",
    ),
    Setting(
        "agent.spool_max_bytes",
        512 * 1024 * 1024,
        "int",
        "Spool size cap; oldest batches go first.",
    ),
    Setting(
        "agent.metrics_port", 9471, "int", "Port of the agent's own /metrics and /healthz (0: off)."
    ),
    Setting(
        "agent.job_mapping_dir",
        "",
        "path",
        "Slurm job mapping folder (one file per GPU index or UUID holding the job id).",
    ),
    Setting(
        "agent.attribution_override",
        "",
        "path",
        "TOML file mapping GPU UUID or index to a job id; wins over every other source.",
    ),
    Setting(
        "agent.pod_resources_socket",
        "/var/lib/kubelet/pod-resources/kubelet.sock",
        "path",
        "The kubelet's pod-resources gRPC socket (pod-to-GPU attribution); missing or empty: off.",
    ),
    Setting("agent.proc_root", "/proc", "path", "Root of /proc (injectable for tests)."),
    Setting(
        "agent.cgroup_root", "/sys/fs/cgroup", "path", "Root of cgroup v2 (injectable for tests)."
    ),
    Setting(
        "agent.sdk_socket",
        "/run/fleetscope/agent.sock",
        "path",
        "Unix datagram socket where training processes send step metrics; empty: none "
        "(absolute: a runtime volume the training containers mount too).",
    ),
    Setting(
        "agent.profile_poll_s",
        5.0,
        "float",
        "Seconds between the agent's polls of ingest for on-demand profile requests (0: off).",
    ),
    Setting(
        "agent.trace_dir",
        "",
        "path",
        "Folder training processes write requested traces to; empty: `traces/` next to "
        "agent.sdk_socket.",
    ),
    Setting("agent.tls_ca_file", "", "path", "CA bundle to verify ingest's TLS certificate."),
    Setting(
        "agent.scrape_timeout_s", 5.0, "float", "Timeout of one dcgm-exporter/node_exporter scrape."
    ),
    Setting("agent.ingest_timeout_s", 10.0, "float", "Timeout of one batch POST to ingest."),
    Setting(
        "agent.backoff_max_s",
        60.0,
        "float",
        "Longest wait between retries to ingest (exponential backoff with full jitter).",
    ),
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
    Setting("server.max_body_bytes", 64 * 1024 * 1024, "int", "Largest accepted request body."),
    Setting(
        "server.max_decoded_bytes",
        256 * 1024 * 1024,
        "int",
        "Most bytes one Arrow body may decode to (checked before decompressing), else 413.",
    ),
    Setting("server.max_batch_rows", 1_000_000, "int", "Most rows in one Arrow body, else 413."),
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
        "Require a bearer token for reads of job data (GET /v1/profile-requests/<id>); writes "
        "always need one. /healthz and /metrics never do.",
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
        "Most seconds the writer holds rows before a commit.",
    ),
    Setting(
        "warehouse.flush_rows",
        100_000,
        "int",
        "Rows that trigger a commit before the interval ends.",
    ),
    Setting(
        "warehouse.raw_retention_days", 14, "int", "Days of raw samples kept; roll-ups stay longer."
    ),
    Setting(
        "warehouse.flush_idle_s",
        0.05,
        "float",
        "Seconds without a new batch after which the writer commits what it holds.",
    ),
    Setting(
        "warehouse.queue_max_rows",
        1_000_000,
        "int",
        "Rows waiting for the writer before ingest answers 503 with Retry-After.",
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
        "analyzers.run.embedded,analyzers.traces.service,analyzers.reports.scheduled,"
        "analyzers.prometheus_export,analyzers.autoprofile.plugin",
        "str",
        "Comma-separated modules whose setup(server) runs before the ingest server starts.",
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
        "autoprofile.enabled",
        False,
        "bool",
        "Profile SDK-attached jobs automatically when a trigger rule fires, and periodically "
        "(add analyzers.autoprofile.plugin to server.plugins).",
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
        "Seconds a gateway's claim on a batch id holds; after it another gateway may take the "
        "batch over (a gateway gives up a commit it cannot finish within its lease).",
    ),
    Setting(
        "fleet.commit_attempts",
        20,
        "int",
        "Attempts at an Iceberg commit that conflicts with another gateway's before giving up.",
    ),
    # -- analyzers and scheduling ------------------------------------------------------------
    Setting("scheduler.mode", "embedded", "str", "embedded (in the server process) or celery."),
    Setting("scheduler.interval_s", 60.0, "float", "Seconds between analyzer windows."),
    Setting(
        "celery.broker_url", "redis://127.0.0.1:6379/0", "str", "Celery broker URL (fleet mode)."
    ),
    Setting(
        "analyzers.bucket_s",
        86400,
        "int",
        "Seconds in an analysis bucket: a finding's identity window (runs inside it update it).",
    ),
    Setting(
        "analyzers.lateness_s",
        120.0,
        "float",
        "Seconds a scheduled window waits for late samples before it is analyzed.",
    ),
    Setting(
        "analyzers.reopen_max_age_s",
        7 * 86400.0,
        "float",
        "Oldest data (seconds before now) whose late arrival re-opens its bucket for analysis; "
        "older buckets are reported as skipped; 0: no bound.",
    ),
    Setting(
        "analyzers.partitions", 4, "int", "Slices of the fleet a window is cut into (Celery mode)."
    ),
    Setting(
        "analyzers.enabled", "", "str", "Comma-separated analyzer names to run; empty runs all."
    ),
    Setting(
        "analyzers.thresholds_file",
        "",
        "path",
        "TOML file of threshold overrides, one [analyzer_name] table each.",
    ),
    Setting(
        "analyzers.max_gap_s",
        300.0,
        "float",
        "Largest sample gap still counted as allocated GPU time (missing samples).",
    ),
    Setting(
        "analyzers.metrics_window_s",
        86400.0,
        "float",
        "Seconds of findings and job efficiency the server's /metrics reports (fleetscope_* "
        "findings families).",
    ),
    Setting(
        "analyzers.metrics_top_jobs",
        20,
        "int",
        'Jobs with their own series on /metrics; the rest are summed into job="other".',
    ),
    Setting(
        "analyzers.metrics_refresh_s",
        60.0,
        "float",
        "Seconds a computed /metrics snapshot of findings and GPU-hours is served before a "
        "scrape recomputes it.",
    ),
    Setting(
        "analyzers.startup_grace_s",
        0.0,
        "float",
        "Seconds at a job's start (checkpoint load) that rules do not judge; 0 pools every sample.",
    ),
    Setting(
        "analyzers.gpus_per_node", 8, "int", "GPUs in a full node (multi-node fragmentation, R15)."
    ),
    Setting(
        "analyzers.sketches_dir",
        "",
        "path",
        "Folder of the quantile-sketch store (Parquet + manifest); empty: <data_dir>/sketches.",
    ),
    Setting(
        "analyzers.sketch_pane_s",
        10,
        "int",
        "Seconds in a quantile-sketch pane (must divide 60); panes roll up to 1 min and 1 h.",
    ),
    Setting(
        "analyzers.sketch_pane_retention_s",
        6 * 3600.0,
        "float",
        "How long pane sketches are kept, back from the newest sample (older panes are not "
        "built; files go by whole days); 0: forever.",
    ),
    Setting(
        "analyzers.sketch_minute_retention_s",
        86400.0,
        "float",
        "How long 1 min sketch roll-ups are kept (whole days); 0: forever.",
    ),
    Setting(
        "analyzers.sketch_hour_retention_s",
        400 * 86400.0,
        "float",
        "How long 1 h sketch roll-ups are kept (whole days); 0: forever.",
    ),
    # -- dashboard ----------------------------------------------------------------------------
    Setting("dashboard.port", 8501, "int", "Port of the Streamlit dashboard."),
    Setting(
        "dashboard.default_window",
        "last 7 days",
        "str",
        "Window pages open with: last hour, last 6 hours, last 24 hours, last 7 days, last 28 days.",
    ),
    Setting("dashboard.cache_ttl_s", 10.0, "float", "Seconds a dashboard query result is cached."),
    # -- weekly reports -------------------------------------------------------------------------
    Setting(
        "reports.out_dir", "", "path", "Folder reports are written to; empty: <data_dir>/reports."
    ),
    Setting("reports.trend_weeks", 6, "int", "Weeks of efficiency trend a weekly report shows."),
    Setting("reports.smtp_host", "", "str", "SMTP server that delivers reports; empty: no email."),
    Setting("reports.smtp_port", 25, "int", "Port of the SMTP server."),
    Setting("reports.from_addr", "fleetscope@localhost", "str", "From address of report emails."),
    Setting(
        "reports.email_domain",
        "",
        "str",
        "Domain appended to catalog user names to mail them (user@domain); empty: no user mail.",
    ),
    Setting(
        "reports.admin_recipients", "", "str", "Comma-separated addresses of the fleet report."
    ),
    Setting(
        "reports.dashboard_url",
        "http://127.0.0.1:8501",
        "str",
        "Base URL of the dashboard, linked from reports.",
    ),
    # -- simulator ----------------------------------------------------------------------------
    Setting("simulator.hosts", 16, "int", "Simulated hosts (8 GPUs each)."),
    Setting("simulator.base_port", 19400, "int", "First port of the simulated dcgm-exporters."),
    Setting("simulator.seed", 7, "int", "Random seed of the job scenarios."),
    Setting(
        "simulator.cluster", "default", "str", "Cluster name on simulated jobs and batch rows."
    ),
    Setting(
        "simulator.scrape_failure_rate",
        0.003,
        "float",
        "Share of scrapes a simulated exporter answers 503 (the third host: 0.05).",
    ),
)
