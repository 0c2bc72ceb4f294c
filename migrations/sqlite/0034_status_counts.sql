-- The queue's counts by status (issue 40; keep in step with
-- ../postgres/0034_status_counts.sql).
--
-- The jobs page and `/metrics` showed `SELECT status, COUNT(*) FROM crashes GROUP BY
-- status`: a read of the whole queue index, one entry per crash ever received (127.9 ms
-- for the jobs page at 300,000 crashes on SQLite). Here the counts themselves, one row
-- per status (and shard: always 0 on SQLite, which has one writer), kept by triggers on
-- every insert, status change and delete of a crash; a status whose count falls to 0
-- keeps its row (`crashes::count_by_status` leaves it out).
CREATE TABLE crash_status_counts (
    status TEXT NOT NULL,
    shard  BIGINT NOT NULL,
    count  BIGINT NOT NULL,
    PRIMARY KEY (status, shard)
) WITHOUT ROWID;

INSERT INTO crash_status_counts (status, shard, count)
SELECT status, 0, COUNT(*) FROM crashes GROUP BY status;

CREATE TRIGGER crash_status_counts_insert AFTER INSERT ON crashes
BEGIN
    INSERT INTO crash_status_counts (status, shard, count) VALUES (NEW.status, 0, 1)
    ON CONFLICT (status, shard) DO UPDATE SET count = count + 1;
END;

CREATE TRIGGER crash_status_counts_update AFTER UPDATE OF status ON crashes
WHEN OLD.status IS NOT NEW.status
BEGIN
    UPDATE crash_status_counts SET count = count - 1 WHERE status = OLD.status AND shard = 0;
    INSERT INTO crash_status_counts (status, shard, count) VALUES (NEW.status, 0, 1)
    ON CONFLICT (status, shard) DO UPDATE SET count = count + 1;
END;

CREATE TRIGGER crash_status_counts_delete AFTER DELETE ON crashes
BEGIN
    UPDATE crash_status_counts SET count = count - 1 WHERE status = OLD.status AND shard = 0;
END;
