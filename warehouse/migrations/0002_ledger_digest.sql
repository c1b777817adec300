-- The content digest of each accepted batch (issue 28): the same batch id with other content, or
-- for another table, is refused 409 instead of answered as a duplicate. Rows from before this
-- migration have none and keep answering duplicate.
ALTER TABLE ingest_batches ADD COLUMN digest VARCHAR;
