-- How far the ingest log (warehouse.storage.ingest_log, issue 27) is flushed into this database: written in
-- the same transaction as the rows it flushed, so a restart replays exactly the records after it.
CREATE TABLE ingest_log_position (
    id INTEGER PRIMARY KEY,
    segment BIGINT NOT NULL,
    log_offset BIGINT NOT NULL
);
