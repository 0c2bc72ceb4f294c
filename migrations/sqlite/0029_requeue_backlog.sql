-- Requeues remembered past an allowance (issue 42): a source bundle that arrives after
-- more crashes naming its build-id than the uploading token's allowance of requeued
-- crashes takes (`--requeue-per-minute`) leaves a row here, and the server's backlog
-- pass requeues the rest later, a bounded number at a time, until none is left. `since`
-- is the bundle's upload time: a crash finished before it was processed without it.
CREATE TABLE requeue_backlog (
    build_id TEXT PRIMARY KEY,
    since BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL
);
