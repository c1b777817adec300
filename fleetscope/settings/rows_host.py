"""Settings rows of the core and of the agent on each GPU host (part of the one table)."""

from __future__ import annotations

from fleetscope.settings.setting import Setting

ROWS: tuple[Setting, ...] = (
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
)
