-- What `/metrics` and a project's crash list count of every crash, kept as counts: the
-- crashes by project and status, and the bytes of the dumps each project keeps (issue
-- 40; keep in step with ../postgres/0033_project_counts.sql).
--
-- `/metrics` gives the crashes of each project by state; it counted them with `SELECT
-- project, status, COUNT(*) FROM crashes GROUP BY project, status` at every scrape, a
-- read of every crash ever received. 0034 keeps the counts by status alone (the jobs
-- page); here the same counts with their project, which both read: one row per project
-- and status (and shard: always 0 on SQLite, which has one writer), kept by triggers on
-- every insert, status change and delete of a crash (a crash's project never changes,
-- but a change would be followed too). A count that falls to 0 keeps its row (the
-- readers leave it out).
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
) WITHOUT ROWID;

INSERT INTO crash_project_counts (project, status, shard, count)
SELECT project, status, 0, COUNT(*) FROM crashes GROUP BY project, status;

CREATE TRIGGER crash_project_counts_insert AFTER INSERT ON crashes
BEGIN
    INSERT INTO crash_project_counts (project, status, shard, count)
    VALUES (NEW.project, NEW.status, 0, 1)
    ON CONFLICT (project, status, shard) DO UPDATE SET count = count + 1;
END;

CREATE TRIGGER crash_project_counts_update AFTER UPDATE OF status, project ON crashes
WHEN OLD.status IS NOT NEW.status OR OLD.project IS NOT NEW.project
BEGIN
    UPDATE crash_project_counts SET count = count - 1
    WHERE project = OLD.project AND status = OLD.status AND shard = 0;
    INSERT INTO crash_project_counts (project, status, shard, count)
    VALUES (NEW.project, NEW.status, 0, 1)
    ON CONFLICT (project, status, shard) DO UPDATE SET count = count + 1;
END;

CREATE TRIGGER crash_project_counts_delete AFTER DELETE ON crashes
BEGIN
    UPDATE crash_project_counts SET count = count - 1
    WHERE project = OLD.project AND status = OLD.status AND shard = 0;
END;

DROP TRIGGER IF EXISTS crash_status_counts_insert;
DROP TRIGGER IF EXISTS crash_status_counts_update;
DROP TRIGGER IF EXISTS crash_status_counts_delete;
DROP TABLE IF EXISTS crash_status_counts;

-- The dumps each project keeps (`usage::bytes`: a project's crash list and `/metrics`)
-- were `SUM(dump_size)` over `SELECT DISTINCT project, dump_sha256, dump_size FROM
-- crashes WHERE dump_gone IS NULL`, a read of every crash (about 1 s at 130,000 crashes
-- on PostgreSQL). Here one row per project and dump kept, with the number of its
-- crashes that keep it, and per project (and shard, as above) the bytes and the number
-- of those dumps: a dump counts once per project, when its first crash keeps it, and
-- stops counting when its last one no longer does (deleted, its dump removed).
CREATE TABLE project_dumps (
    project     TEXT NOT NULL,
    dump_sha256 TEXT NOT NULL,
    dump_size   BIGINT NOT NULL,
    crashes     BIGINT NOT NULL,
    PRIMARY KEY (project, dump_sha256, dump_size)
) WITHOUT ROWID;

CREATE TABLE project_dump_bytes (
    project TEXT NOT NULL,
    shard   BIGINT NOT NULL,
    bytes   BIGINT NOT NULL,
    dumps   BIGINT NOT NULL,
    PRIMARY KEY (project, shard)
) WITHOUT ROWID;

INSERT INTO project_dumps (project, dump_sha256, dump_size, crashes)
SELECT project, dump_sha256, dump_size, COUNT(*) FROM crashes WHERE dump_gone IS NULL
GROUP BY project, dump_sha256, dump_size;

INSERT INTO project_dump_bytes (project, shard, bytes, dumps)
SELECT project, 0, SUM(dump_size), COUNT(*) FROM project_dumps GROUP BY project;

CREATE TRIGGER project_dumps_insert AFTER INSERT ON crashes WHEN NEW.dump_gone IS NULL
BEGIN
    INSERT INTO project_dump_bytes (project, shard, bytes, dumps)
    SELECT NEW.project, 0, NEW.dump_size, 1 WHERE NOT EXISTS (SELECT 1 FROM project_dumps
        WHERE project = NEW.project AND dump_sha256 = NEW.dump_sha256
        AND dump_size = NEW.dump_size)
    ON CONFLICT (project, shard) DO UPDATE SET bytes = bytes + excluded.bytes,
        dumps = dumps + 1;
    INSERT INTO project_dumps (project, dump_sha256, dump_size, crashes)
    VALUES (NEW.project, NEW.dump_sha256, NEW.dump_size, 1)
    ON CONFLICT (project, dump_sha256, dump_size) DO UPDATE SET crashes = crashes + 1;
END;

CREATE TRIGGER project_dumps_delete AFTER DELETE ON crashes WHEN OLD.dump_gone IS NULL
BEGIN
    UPDATE project_dumps SET crashes = crashes - 1 WHERE project = OLD.project
    AND dump_sha256 = OLD.dump_sha256 AND dump_size = OLD.dump_size;
    UPDATE project_dump_bytes SET bytes = bytes - OLD.dump_size, dumps = dumps - 1
    WHERE project = OLD.project AND shard = 0 AND EXISTS (SELECT 1 FROM project_dumps
        WHERE project = OLD.project AND dump_sha256 = OLD.dump_sha256
        AND dump_size = OLD.dump_size AND crashes = 0);
    DELETE FROM project_dumps WHERE project = OLD.project AND dump_sha256 = OLD.dump_sha256
    AND dump_size = OLD.dump_size AND crashes = 0;
END;

-- a dump removed (retention, sampling) or a crash's dump or project changed: the old
-- dump as deleted, the new one as inserted
CREATE TRIGGER project_dumps_update
AFTER UPDATE OF dump_gone, dump_sha256, dump_size, project ON crashes
WHEN (OLD.dump_gone IS NULL) <> (NEW.dump_gone IS NULL)
    OR OLD.dump_sha256 IS NOT NEW.dump_sha256 OR OLD.dump_size IS NOT NEW.dump_size
    OR OLD.project IS NOT NEW.project
BEGIN
    UPDATE project_dumps SET crashes = crashes - 1 WHERE OLD.dump_gone IS NULL
    AND project = OLD.project AND dump_sha256 = OLD.dump_sha256
    AND dump_size = OLD.dump_size;
    UPDATE project_dump_bytes SET bytes = bytes - OLD.dump_size, dumps = dumps - 1
    WHERE OLD.dump_gone IS NULL AND project = OLD.project AND shard = 0
    AND EXISTS (SELECT 1 FROM project_dumps WHERE project = OLD.project
        AND dump_sha256 = OLD.dump_sha256 AND dump_size = OLD.dump_size AND crashes = 0);
    DELETE FROM project_dumps WHERE project = OLD.project AND dump_sha256 = OLD.dump_sha256
    AND dump_size = OLD.dump_size AND crashes = 0;
    INSERT INTO project_dump_bytes (project, shard, bytes, dumps)
    SELECT NEW.project, 0, NEW.dump_size, 1 WHERE NEW.dump_gone IS NULL
    AND NOT EXISTS (SELECT 1 FROM project_dumps WHERE project = NEW.project
        AND dump_sha256 = NEW.dump_sha256 AND dump_size = NEW.dump_size)
    ON CONFLICT (project, shard) DO UPDATE SET bytes = bytes + excluded.bytes,
        dumps = dumps + 1;
    INSERT INTO project_dumps (project, dump_sha256, dump_size, crashes)
    SELECT NEW.project, NEW.dump_sha256, NEW.dump_size, 1 WHERE NEW.dump_gone IS NULL
    ON CONFLICT (project, dump_sha256, dump_size) DO UPDATE SET crashes = crashes + 1;
END;
