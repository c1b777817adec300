"""Settings rows of analyzers and scheduling, the dashboard, weekly reports and the simulator
(part of the one table)."""

from __future__ import annotations

from fleetscope.settings.setting import Setting

ROWS: tuple[Setting, ...] = (
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
        "older buckets are reported as skipped; 0: no bound. Never past "
        "warehouse.raw_retention_days (a retired day holds only its late rows).",
    ),
    Setting(
        "analyzers.partitions",
        4,
        "int",
        "Slices of the fleet a window is cut into (Celery mode; fleet mode cuts a window per cluster instead, one slice).",
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
        'Jobs with their own series on /metrics; the rest are summed into job_id="other".',
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
        "analyzers.slice_gpus",
        128,
        "int",
        "GPUs a scheduled window reads at once: a larger fleet's window is analysed in slices of "
        "whole hosts (every job's hosts in one slice), landed together; 0: the whole window.",
    ),
    Setting(
        "analyzers.sketches_dir",
        "",
        "path",
        "Folder of the quantile-sketch store (Parquet + manifest) in embedded mode; empty: "
        "<data_dir>/sketches. Fleet mode keeps the sketches in the fleet's Iceberg storage.",
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
    Setting(
        "analyzers.sharing_days",
        7.0,
        "float",
        "Days of the sharing plan the scheduled pass stores for the Sharing page (the page's "
        "default window); 0: none stored, the page computes it on open.",
        minimum=0.0,
    ),
    Setting(
        "analyzers.sharing_every_s",
        3600.0,
        "float",
        "Seconds between two sharing plans the scheduled pass stores; the page shows a stored "
        "plan at most this (plus lateness and one tick) behind its window's end.",
        minimum=60.0,
    ),
    Setting(
        "analyzers.percentiles_days",
        7.0,
        "float",
        "Days of the fleet percentiles (active % of allocated GPUs, from the quantile sketches) "
        "the scheduled pass stores for the Fleet page (the page's default window); 0: none "
        "stored, the page merges the sketches on open.",
        minimum=0.0,
    ),
    Setting(
        "analyzers.percentiles_every_s",
        3600.0,
        "float",
        "Seconds between two fleet percentiles the scheduled pass stores; the page shows stored "
        "percentiles at most this (plus lateness and one tick) behind its window's end.",
        minimum=60.0,
    ),
    # -- dashboard ----------------------------------------------------------------------------
    Setting("dashboard.port", 8501, "int", "Port of the Streamlit dashboard."),
    Setting(
        "dashboard.default_window",
        "last 7 days",
        "str",
        "Time range pages open with (a link's ?range= wins): last 5 minutes, last 15 minutes, "
        "last hour, last 6 hours, last 24 hours, last 7 days, last 28 days, or its code (5m, 15m, "
        "1h, 6h, 24h, 7d, 28d).",
    ),
    Setting(
        "dashboard.cache_ttl_s",
        10.0,
        "float",
        "Seconds a dashboard catalog read (findings, opportunities, traces) is cached; telemetry "
        "reads follow the warehouse's data version instead (fleet mode: it moves this often).",
    ),
    Setting(
        "dashboard.oidc_issuer",
        "",
        "str",
        "OpenID Connect issuer URL (its /.well-known/openid-configuration is read); set, every "
        "visitor logs in there first (Streamlit's st.login); empty: no login.",
    ),
    Setting("dashboard.oidc_client_id", "", "str", "The dashboard's client id at the issuer."),
    Setting("dashboard.oidc_client_secret", "", "str", "The dashboard's client secret."),
    Setting(
        "dashboard.oidc_redirect_uri",
        "",
        "str",
        "The dashboard's public URL plus /oauth2callback, as registered at the issuer.",
    ),
    Setting(
        "dashboard.oidc_cookie_secret",
        "",
        "str",
        "Secret that signs the login cookie (32+ random characters); empty: a new one per start "
        "(logins then end at each restart).",
    ),
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
    # -- notify (analyzers.notify) ------------------------------------------------------------
    Setting(
        "notify.webhook_url",
        "",
        "str",
        "Webhook that receives new and escalated findings as Alertmanager's webhook JSON "
        "(version 4); empty: off.",
    ),
    Setting(
        "notify.slack_webhook_url",
        "",
        "str",
        'Slack-style incoming webhook ({"text": ...}) for the same notifications; empty: off.',
    ),
    Setting(
        "notify.min_severity",
        "critical",
        "str",
        "Least severity notified (info, warn, critical).",
    ),
    Setting("notify.interval_s", 60.0, "float", "Seconds between two reads of new findings."),
    Setting(
        "notify.lookback_s",
        86400.0,
        "float",
        "Findings whose window ended within this many seconds are notified (older ones never).",
    ),
    Setting("notify.timeout_s", 10.0, "float", "Timeout of one notification POST."),
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
