-- 0001: the contract's three sample tables (fleetscope.contract SCHEMA_VERSION 1) and the
-- ingest ledger. Columns must match warehouse.storage.schema.columns(contract schema): a test checks it.

CREATE TABLE gpu_samples (
    ts TIMESTAMP WITH TIME ZONE NOT NULL,
    cluster VARCHAR,
    host VARCHAR NOT NULL,
    gpu_index SMALLINT NOT NULL,
    gpu_uuid VARCHAR,
    gpu_model VARCHAR,
    mig_profile VARCHAR,
    mig_instance_id SMALLINT,
    job_id VARCHAR,
    attribution VARCHAR,
    pod VARCHAR,
    namespace VARCHAR,
    container VARCHAR,
    gpu_util DOUBLE,
    gr_engine_active DOUBLE,
    sm_active DOUBLE,
    sm_occupancy DOUBLE,
    tensor_active DOUBLE,
    dram_active DOUBLE,
    fp16_active DOUBLE,
    fp32_active DOUBLE,
    fp64_active DOUBLE,
    mem_copy_util DOUBLE,
    fb_used_mib DOUBLE,
    fb_free_mib DOUBLE,
    power_w DOUBLE,
    temp_c DOUBLE,
    sm_clock_mhz DOUBLE,
    mem_clock_mhz DOUBLE,
    pcie_tx_bytes_s DOUBLE,
    pcie_rx_bytes_s DOUBLE,
    nvlink_tx_bytes_s DOUBLE,
    nvlink_rx_bytes_s DOUBLE,
    xid_last DOUBLE,
    ecc_dbe_total DOUBLE,
    pcie_replay_total DOUBLE,
    power_violation_us DOUBLE,
    thermal_violation_us DOUBLE,
    clocks_event_reasons DOUBLE,
    extra MAP(VARCHAR, DOUBLE)
);

CREATE TABLE host_samples (
    ts TIMESTAMP WITH TIME ZONE NOT NULL,
    cluster VARCHAR,
    host VARCHAR NOT NULL,
    job_id VARCHAR,
    cpu_user_pct DOUBLE,
    cpu_system_pct DOUBLE,
    cpu_iowait_pct DOUBLE,
    cpu_cores DOUBLE,
    mem_used_bytes DOUBLE,
    mem_total_bytes DOUBLE,
    net_rx_bytes_s DOUBLE,
    net_tx_bytes_s DOUBLE,
    disk_read_bytes_s DOUBLE,
    disk_write_bytes_s DOUBLE,
    load1 DOUBLE
);

CREATE TABLE step_samples (
    ts TIMESTAMP WITH TIME ZONE NOT NULL,
    cluster VARCHAR,
    host VARCHAR NOT NULL,
    job_id VARCHAR,
    rank INTEGER,
    pid INTEGER,
    step BIGINT NOT NULL,
    step_time_s DOUBLE NOT NULL,
    data_wait_s DOUBLE,
    h2d_copy_s DOUBLE,
    batch_size BIGINT,
    samples_per_s DOUBLE,
    dataloader_workers INTEGER
);

-- One row per accepted batch: dedup by batch id is exact across restarts.
CREATE TABLE ingest_batches (
    batch_id VARCHAR PRIMARY KEY,
    table_name VARCHAR NOT NULL,
    rows BIGINT NOT NULL,
    agent VARCHAR,
    flush_seq BIGINT NOT NULL,
    received_at TIMESTAMP WITH TIME ZONE NOT NULL
);

-- One row per writer commit, naming the Parquet segments it published (crash recovery).
CREATE TABLE ingest_flushes (
    flush_seq BIGINT PRIMARY KEY,
    committed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    segments VARCHAR[] NOT NULL
);
