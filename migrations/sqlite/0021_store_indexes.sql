-- A store that grows (issue 40; keep in step with ../postgres/0021_store_indexes.sql).
--
-- The module index: which crashes used a build-id, and which crashes have a module of a
-- given file name, newest first. Written by the worker with the search index when a
-- report is stored (a reprocessed crash's rows are replaced), so that the reprocess
-- selection by build-id and the crash list's module filter read an index instead of
-- every report (`report LIKE`: 9.9 s over a million crashes) or every crash of a module
-- most crashes have (0.24 s).
--
-- `crash_build_ids`: every build-id, debug-id and code-id a report names for a module
-- or one of its files, lower-case (the reprocess filter's build-id is lower-cased too).
CREATE TABLE crash_build_ids (
    build_id TEXT NOT NULL,
    crash_id TEXT NOT NULL,
    PRIMARY KEY (build_id, crash_id)
) WITHOUT ROWID;
CREATE INDEX crash_build_ids_crash ON crash_build_ids (crash_id);

-- `crash_module_names`: a crash's module file names (as the search index's module
-- terms), with its `received_at`, so that a module's crashes are read newest first from
-- the index alone.
CREATE TABLE crash_module_names (
    name     TEXT NOT NULL,
    crash_at BIGINT NOT NULL,
    crash_id TEXT NOT NULL,
    PRIMARY KEY (name, crash_at, crash_id)
) WITHOUT ROWID;
CREATE INDEX crash_module_names_crash ON crash_module_names (crash_id);

-- Backfill, from the reports and module terms stored so far.
INSERT OR IGNORE INTO crash_build_ids (build_id, crash_id)
SELECT DISTINCT lower(j.value), c.id
FROM crashes c,
     json_tree(CASE WHEN json_valid(c.report) THEN c.report ELSE '{}' END, '$.modules') j
WHERE c.report IS NOT NULL AND j.key IN ('build_id', 'debug_id', 'code_id')
  AND j.type = 'text' AND j.value <> '';

INSERT OR IGNORE INTO crash_module_names (name, crash_at, crash_id)
SELECT st.term, c.received_at, c.id
FROM crash_terms ct JOIN search_terms st ON st.id = ct.term_id
JOIN crashes c ON c.id = ct.crash_id
WHERE st.kind = 'module';

-- Rollups of the groups page. Summing a window's `crash_group_days` rows (0006) read
-- one row per signature, day, product and version: at a million crashes 0.5 s for 30
-- days and 1.9 s for 90. Here each group keeps, per UTC day with crashes, its count that
-- day and its running count up to and including it (`crash_group_running`), once over
-- every crash (scope '') and once per product (scope 'p:' || product), so that a window's
-- count is the running count at its end minus the one before its start: two index
-- lookups per group however many crashes and days. A day whose count falls to 0 is
-- deleted: the running count before it is the same.
--
-- The analysis-kind filter reads `crash_group_kinds` (one row per kind, signature, day,
-- product and version) instead of joining the search index to the window's crashes
-- (3.3 s at a million). The kind is a column of the crash, written with its report.
--
-- Both follow every crash that gains, loses or changes its signature or kind (first
-- processing, reprocessing, merges, splits, deletes) through the triggers below, as the
-- group rows of 0006 do. A crash moved on an old day updates its group's later days (at
-- most one row per day since).
ALTER TABLE crashes ADD COLUMN analysis_kind TEXT;
UPDATE crashes SET analysis_kind = (
    SELECT MIN(st.term) FROM crash_terms ct JOIN search_terms st ON st.id = ct.term_id
    WHERE ct.crash_id = crashes.id AND st.kind = 'analysis')
WHERE id IN (SELECT ct.crash_id FROM crash_terms ct JOIN search_terms st ON st.id = ct.term_id
             WHERE st.kind = 'analysis');

CREATE TABLE crash_group_running (
    scope      TEXT NOT NULL,
    signature  TEXT NOT NULL,
    day        BIGINT NOT NULL,
    count      BIGINT NOT NULL,
    running    BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL,
    PRIMARY KEY (scope, signature, day)
) WITHOUT ROWID;

CREATE TABLE crash_group_kinds (
    kind      TEXT NOT NULL,
    signature TEXT NOT NULL,
    day       BIGINT NOT NULL,
    product   TEXT NOT NULL,
    version   TEXT NOT NULL,
    count     BIGINT NOT NULL,
    PRIMARY KEY (kind, signature, day, product, version)
) WITHOUT ROWID;

INSERT INTO crash_group_running (scope, signature, day, count, running, first_seen, last_seen)
SELECT '', signature, day, n, SUM(n) OVER (PARTITION BY signature ORDER BY day), f, l
FROM (SELECT signature, day, SUM(count) AS n, MIN(first_seen) AS f, MAX(last_seen) AS l
      FROM crash_group_days GROUP BY signature, day);
INSERT INTO crash_group_running (scope, signature, day, count, running, first_seen, last_seen)
SELECT 'p:' || product, signature, day, n,
       SUM(n) OVER (PARTITION BY product, signature ORDER BY day), f, l
FROM (SELECT product, signature, day, SUM(count) AS n, MIN(first_seen) AS f,
             MAX(last_seen) AS l
      FROM crash_group_days WHERE product <> '' GROUP BY product, signature, day);
INSERT INTO crash_group_kinds (kind, signature, day, product, version, count)
SELECT analysis_kind, signature, received_at / 86400000, COALESCE(product, ''),
       COALESCE(version, ''), COUNT(*)
FROM crashes WHERE analysis_kind IS NOT NULL AND analysis_kind <> ''
  AND signature IS NOT NULL AND signature <> ''
GROUP BY analysis_kind, signature, received_at / 86400000, COALESCE(product, ''),
         COALESCE(version, '');

-- One crash entering (delta 1) or leaving (delta -1) the rollups: its running counts
-- when `running` is 1 (its group changed), its kind row when it has a kind. Written
-- once, here, and called by the triggers on crashes below (SQLite has no functions).
CREATE VIEW crash_rollup_moves AS
SELECT '' AS signature, 0 AS at, '' AS product, '' AS version, '' AS kind, 0 AS running,
       0 AS delta
WHERE 0;

CREATE TRIGGER crash_rollup_move INSTEAD OF INSERT ON crash_rollup_moves
BEGIN
    UPDATE crash_group_running SET running = running + NEW.delta
    WHERE NEW.running = 1 AND scope IN ('', 'p:' || NULLIF(NEW.product, ''))
      AND signature = NEW.signature AND day > NEW.at / 86400000;
    INSERT INTO crash_group_running (scope, signature, day, count, running, first_seen, last_seen)
    SELECT s.scope, NEW.signature, NEW.at / 86400000, 1,
        COALESCE((SELECT r.running FROM crash_group_running r WHERE r.scope = s.scope
            AND r.signature = NEW.signature AND r.day < NEW.at / 86400000
            ORDER BY r.day DESC LIMIT 1), 0) + 1,
        NEW.at, NEW.at
    FROM (SELECT '' AS scope UNION ALL SELECT 'p:' || NEW.product WHERE NEW.product <> '') s
    WHERE NEW.running = 1 AND NEW.delta > 0
    ON CONFLICT (scope, signature, day) DO UPDATE SET count = count + 1,
        running = running + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
    UPDATE crash_group_running SET count = count - 1, running = running - 1
    WHERE NEW.running = 1 AND NEW.delta < 0 AND scope IN ('', 'p:' || NULLIF(NEW.product, ''))
      AND signature = NEW.signature AND day = NEW.at / 86400000;
    DELETE FROM crash_group_running
    WHERE NEW.running = 1 AND NEW.delta < 0 AND scope IN ('', 'p:' || NULLIF(NEW.product, ''))
      AND signature = NEW.signature AND day = NEW.at / 86400000 AND count <= 0;
    UPDATE crash_group_running SET
        first_seen = (SELECT MIN(c.received_at) FROM crashes c
            WHERE c.signature = NEW.signature AND c.received_at >= day * 86400000
              AND c.received_at < (day + 1) * 86400000
              AND (crash_group_running.scope = '' OR 'p:' || c.product = crash_group_running.scope)),
        last_seen = (SELECT MAX(c.received_at) FROM crashes c
            WHERE c.signature = NEW.signature AND c.received_at >= day * 86400000
              AND c.received_at < (day + 1) * 86400000
              AND (crash_group_running.scope = '' OR 'p:' || c.product = crash_group_running.scope))
    WHERE NEW.running = 1 AND NEW.delta < 0 AND scope IN ('', 'p:' || NULLIF(NEW.product, ''))
      AND signature = NEW.signature AND day = NEW.at / 86400000
      AND (first_seen = NEW.at OR last_seen = NEW.at);
    INSERT INTO crash_group_kinds (kind, signature, day, product, version, count)
    SELECT NEW.kind, NEW.signature, NEW.at / 86400000, NEW.product, NEW.version, 1
    WHERE NEW.delta > 0 AND NEW.kind <> ''
    ON CONFLICT (kind, signature, day, product, version) DO UPDATE SET count = count + 1;
    UPDATE crash_group_kinds SET count = count - 1
    WHERE NEW.delta < 0 AND kind = NEW.kind AND signature = NEW.signature
      AND day = NEW.at / 86400000 AND product = NEW.product AND version = NEW.version;
    DELETE FROM crash_group_kinds
    WHERE NEW.delta < 0 AND kind = NEW.kind AND signature = NEW.signature
      AND day = NEW.at / 86400000 AND product = NEW.product AND version = NEW.version
      AND count <= 0;
END;

-- A new crash that already has a signature (imports): product and version from the
-- annotations, as 0006's insert trigger takes them.
CREATE TRIGGER crash_rollups_insert AFTER INSERT ON crashes
WHEN NEW.signature IS NOT NULL AND NEW.signature <> ''
BEGIN
    INSERT INTO crash_rollup_moves (signature, at, product, version, kind, running, delta)
    VALUES (NEW.signature, NEW.received_at,
        COALESCE(CASE WHEN json_valid(NEW.annotations) THEN
            COALESCE(json_extract(NEW.annotations, '$.prod'), json_extract(NEW.annotations, '$.product')) END, ''),
        COALESCE(CASE WHEN json_valid(NEW.annotations) THEN
            COALESCE(json_extract(NEW.annotations, '$.ver'), json_extract(NEW.annotations, '$.version')) END, ''),
        COALESCE(NEW.analysis_kind, ''), 1, 1);
END;

CREATE TRIGGER crash_rollups_leave AFTER UPDATE OF signature, analysis_kind ON crashes
WHEN (OLD.signature IS NOT NEW.signature OR OLD.analysis_kind IS NOT NEW.analysis_kind)
    AND OLD.signature IS NOT NULL AND OLD.signature <> ''
BEGIN
    INSERT INTO crash_rollup_moves (signature, at, product, version, kind, running, delta)
    VALUES (OLD.signature, OLD.received_at, COALESCE(OLD.product, ''),
        COALESCE(OLD.version, ''), COALESCE(OLD.analysis_kind, ''),
        OLD.signature IS NOT NEW.signature, -1);
END;

CREATE TRIGGER crash_rollups_join AFTER UPDATE OF signature, analysis_kind ON crashes
WHEN (OLD.signature IS NOT NEW.signature OR OLD.analysis_kind IS NOT NEW.analysis_kind)
    AND NEW.signature IS NOT NULL AND NEW.signature <> ''
BEGIN
    INSERT INTO crash_rollup_moves (signature, at, product, version, kind, running, delta)
    VALUES (NEW.signature, NEW.received_at, COALESCE(NEW.product, ''),
        COALESCE(NEW.version, ''), COALESCE(NEW.analysis_kind, ''),
        OLD.signature IS NOT NEW.signature, 1);
END;

CREATE TRIGGER crash_rollups_delete AFTER DELETE ON crashes
WHEN OLD.signature IS NOT NULL AND OLD.signature <> ''
BEGIN
    INSERT INTO crash_rollup_moves (signature, at, product, version, kind, running, delta)
    VALUES (OLD.signature, OLD.received_at, COALESCE(OLD.product, ''),
        COALESCE(OLD.version, ''), COALESCE(OLD.analysis_kind, ''), 1, -1);
END;
