-- The queue's counts by status (issue 40; keep in step with
-- ../sqlite/0034_status_counts.sql).
--
-- The jobs page and `/metrics` showed `SELECT status, COUNT(*) FROM crashes GROUP BY
-- status`: a read of the whole queue index, one entry per crash ever received. Here the
-- counts themselves, kept by statement triggers on every insert, update and delete of
-- crashes (one upsert per status a statement changes, from its transition tables: a
-- batch of 100 finished jobs is one change of two counts, not 200).
--
-- Concurrent uploads are concurrent transactions: one counter row per status would make
-- each wait for the other's commit, and two transactions that change two counts each in
-- another order could deadlock. Each connection writes only its own shard of the counts
-- (its backend's pid, unique among the live connections; the backfill is shard 0),
-- which the reader sums: no two transactions ever write the same row. A connection
-- adds at most one row per status (a pool's connections live long; rows of closed
-- connections stay, a few per connection ever opened). A status whose count falls to
-- 0 keeps its rows (`crashes::count_by_status` leaves it out).
CREATE TABLE crash_status_counts (
    status TEXT NOT NULL,
    shard  BIGINT NOT NULL,
    count  BIGINT NOT NULL,
    PRIMARY KEY (status, shard)
);

INSERT INTO crash_status_counts (status, shard, count)
SELECT status, 0, COUNT(*) FROM crashes GROUP BY status;

CREATE FUNCTION crash_status_counts_follow() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO crash_status_counts (status, shard, count)
        SELECT status, pg_backend_pid(), COUNT(*) FROM new_rows
        GROUP BY status ORDER BY status
        ON CONFLICT (status, shard) DO UPDATE SET
            count = crash_status_counts.count + excluded.count;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO crash_status_counts (status, shard, count)
        SELECT status, pg_backend_pid(), -COUNT(*) FROM old_rows
        GROUP BY status ORDER BY status
        ON CONFLICT (status, shard) DO UPDATE SET
            count = crash_status_counts.count + excluded.count;
    ELSE
        INSERT INTO crash_status_counts (status, shard, count)
        SELECT status, pg_backend_pid(), SUM(d) FROM (
            SELECT status, 1 AS d FROM new_rows
            UNION ALL SELECT status, -1 AS d FROM old_rows) m
        GROUP BY status HAVING SUM(d) <> 0 ORDER BY status
        ON CONFLICT (status, shard) DO UPDATE SET
            count = crash_status_counts.count + excluded.count;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_status_counts_insert AFTER INSERT ON crashes
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION crash_status_counts_follow();

CREATE TRIGGER crash_status_counts_update AFTER UPDATE ON crashes
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION crash_status_counts_follow();

CREATE TRIGGER crash_status_counts_delete AFTER DELETE ON crashes
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION crash_status_counts_follow();
