-- What `/metrics` and a project's crash list count of every crash, kept as counts: the
-- crashes by project and status, and the bytes of the dumps each project keeps (issue
-- 40; keep in step with ../sqlite/0033_project_counts.sql).
--
-- `/metrics` gives the crashes of each project by state; it counted them with `SELECT
-- project, status, COUNT(*) FROM crashes GROUP BY project, status` at every scrape, a
-- read of every crash ever received. 0034 keeps the counts by status alone (the jobs
-- page); here the same counts with their project, which both read, kept as 0034 kept
-- its own: statement triggers on every insert, update and delete of crashes, one upsert
-- per project and status a statement changes (from its transition tables), each
-- connection writing only its own shard (its backend's pid; the backfill is shard 0),
-- so that concurrent transactions never write the same row; the reader sums the
-- shards. A count that falls to 0 keeps its rows (the readers leave it out).
--
-- This table replaces 0034's `crash_status_counts`: on a store where 0034 ran first it
-- is dropped here; on a new store 0034 runs after this one and `Db::migrate` drops what
-- it made (`SUPERSEDED`), so that a crash's write keeps one set of counts, not two.
CREATE TABLE crash_project_counts (
    project TEXT NOT NULL,
    status  TEXT NOT NULL,
    shard   BIGINT NOT NULL,
    count   BIGINT NOT NULL,
    PRIMARY KEY (project, status, shard)
);

INSERT INTO crash_project_counts (project, status, shard, count)
SELECT project, status, 0, COUNT(*) FROM crashes GROUP BY project, status;

CREATE FUNCTION crash_project_counts_follow() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO crash_project_counts (project, status, shard, count)
        SELECT project, status, pg_backend_pid(), COUNT(*) FROM new_rows
        GROUP BY project, status ORDER BY project, status
        ON CONFLICT (project, status, shard) DO UPDATE SET
            count = crash_project_counts.count + excluded.count;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO crash_project_counts (project, status, shard, count)
        SELECT project, status, pg_backend_pid(), -COUNT(*) FROM old_rows
        GROUP BY project, status ORDER BY project, status
        ON CONFLICT (project, status, shard) DO UPDATE SET
            count = crash_project_counts.count + excluded.count;
    ELSE
        INSERT INTO crash_project_counts (project, status, shard, count)
        SELECT project, status, pg_backend_pid(), SUM(d) FROM (
            SELECT project, status, 1 AS d FROM new_rows
            UNION ALL SELECT project, status, -1 AS d FROM old_rows) m
        GROUP BY project, status HAVING SUM(d) <> 0 ORDER BY project, status
        ON CONFLICT (project, status, shard) DO UPDATE SET
            count = crash_project_counts.count + excluded.count;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_project_counts_insert AFTER INSERT ON crashes
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION crash_project_counts_follow();

CREATE TRIGGER crash_project_counts_update AFTER UPDATE ON crashes
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION crash_project_counts_follow();

CREATE TRIGGER crash_project_counts_delete AFTER DELETE ON crashes
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION crash_project_counts_follow();

DROP TRIGGER IF EXISTS crash_status_counts_insert ON crashes;
DROP TRIGGER IF EXISTS crash_status_counts_update ON crashes;
DROP TRIGGER IF EXISTS crash_status_counts_delete ON crashes;
DROP FUNCTION IF EXISTS crash_status_counts_follow();
DROP TABLE IF EXISTS crash_status_counts;

-- The dumps each project keeps (`usage::bytes`: a project's crash list and `/metrics`)
-- were `SUM(dump_size)` over `SELECT DISTINCT project, dump_sha256, dump_size FROM
-- crashes WHERE dump_gone IS NULL`, a read of every crash (about 1 s at 130,000 crashes).
-- Here one row per project and dump kept, with the number of its crashes that keep it,
-- and per project and shard (as above) the bytes and the number of those dumps: a dump
-- counts once per project, when its first crash keeps it, and stops counting when its
-- last one no longer does (deleted, its dump removed). Row triggers, firing only on the
-- columns they follow (a finished job's update does not fire them; PostgreSQL allows no
-- column list with transition tables).
CREATE TABLE project_dumps (
    project     TEXT NOT NULL,
    dump_sha256 TEXT NOT NULL,
    dump_size   BIGINT NOT NULL,
    crashes     BIGINT NOT NULL,
    PRIMARY KEY (project, dump_sha256, dump_size)
);

CREATE TABLE project_dump_bytes (
    project TEXT NOT NULL,
    shard   BIGINT NOT NULL,
    bytes   BIGINT NOT NULL,
    dumps   BIGINT NOT NULL,
    PRIMARY KEY (project, shard)
);

INSERT INTO project_dumps (project, dump_sha256, dump_size, crashes)
SELECT project, dump_sha256, dump_size, COUNT(*) FROM crashes WHERE dump_gone IS NULL
GROUP BY project, dump_sha256, dump_size;

INSERT INTO project_dump_bytes (project, shard, bytes, dumps)
SELECT project, 0, SUM(dump_size), COUNT(*) FROM project_dumps GROUP BY project;

CREATE FUNCTION project_dumps_follow() RETURNS trigger AS $$
DECLARE
    n BIGINT;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.dump_gone IS NULL THEN
        UPDATE project_dumps SET crashes = crashes - 1 WHERE project = OLD.project
        AND dump_sha256 = OLD.dump_sha256 AND dump_size = OLD.dump_size
        RETURNING crashes INTO n;
        IF n = 0 THEN
            DELETE FROM project_dumps WHERE project = OLD.project
            AND dump_sha256 = OLD.dump_sha256 AND dump_size = OLD.dump_size;
            INSERT INTO project_dump_bytes (project, shard, bytes, dumps)
            VALUES (OLD.project, pg_backend_pid(), -OLD.dump_size, -1)
            ON CONFLICT (project, shard) DO UPDATE SET
                bytes = project_dump_bytes.bytes + excluded.bytes,
                dumps = project_dump_bytes.dumps + excluded.dumps;
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.dump_gone IS NULL THEN
        INSERT INTO project_dumps (project, dump_sha256, dump_size, crashes)
        VALUES (NEW.project, NEW.dump_sha256, NEW.dump_size, 1)
        ON CONFLICT (project, dump_sha256, dump_size) DO UPDATE SET
            crashes = project_dumps.crashes + 1
        RETURNING crashes INTO n;
        IF n = 1 THEN
            INSERT INTO project_dump_bytes (project, shard, bytes, dumps)
            VALUES (NEW.project, pg_backend_pid(), NEW.dump_size, 1)
            ON CONFLICT (project, shard) DO UPDATE SET
                bytes = project_dump_bytes.bytes + excluded.bytes,
                dumps = project_dump_bytes.dumps + excluded.dumps;
        END IF;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER project_dumps_follow
AFTER INSERT OR DELETE OR UPDATE OF dump_gone, dump_sha256, dump_size, project ON crashes
FOR EACH ROW EXECUTE FUNCTION project_dumps_follow();
