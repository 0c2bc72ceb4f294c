-- A store that grows (issue 40; keep in step with ../sqlite/0021_store_indexes.sql).
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
);
CREATE INDEX crash_build_ids_crash ON crash_build_ids (crash_id);

-- `crash_module_names`: a crash's module file names (as the search index's module
-- terms), with its `received_at`, so that a module's crashes are read newest first from
-- the index alone.
CREATE TABLE crash_module_names (
    name     TEXT NOT NULL,
    crash_at BIGINT NOT NULL,
    crash_id TEXT NOT NULL,
    PRIMARY KEY (name, crash_at, crash_id)
);
CREATE INDEX crash_module_names_crash ON crash_module_names (crash_id);

-- Backfill, from the reports and module terms stored so far. A report that is not JSON
-- names no build-id (the function swallows the parse error; it is dropped after use).
CREATE FUNCTION pm_0021_report_ids(report TEXT) RETURNS SETOF TEXT AS $$
BEGIN
    RETURN QUERY SELECT DISTINCT lower(v #>> '{}') FROM jsonb_path_query(report::jsonb,
        'lax $.modules[*].**.build_id ? (@.type() == "string")') v
    UNION SELECT DISTINCT lower(v #>> '{}') FROM jsonb_path_query(report::jsonb,
        'lax $.modules[*].**.debug_id ? (@.type() == "string")') v
    UNION SELECT DISTINCT lower(v #>> '{}') FROM jsonb_path_query(report::jsonb,
        'lax $.modules[*].**.code_id ? (@.type() == "string")') v;
EXCEPTION WHEN others THEN
    RETURN;
END;
$$ LANGUAGE plpgsql;

INSERT INTO crash_build_ids (build_id, crash_id)
SELECT i, c.id FROM crashes c, pm_0021_report_ids(c.report) i
WHERE c.report IS NOT NULL AND i <> ''
ON CONFLICT DO NOTHING;
DROP FUNCTION pm_0021_report_ids(TEXT);

INSERT INTO crash_module_names (name, crash_at, crash_id)
SELECT st.term, c.received_at, c.id
FROM crash_terms ct JOIN search_terms st ON st.id = ct.term_id
JOIN crashes c ON c.id = ct.crash_id
WHERE st.kind = 'module'
ON CONFLICT DO NOTHING;

-- 0006's `crash_groups_remove`, again, with one change: a first or last seen recomputed
-- from the crashes keeps its value when no crash of the group is left there. PostgreSQL
-- runs AFTER ROW triggers when the whole statement is done, so a statement that moves
-- several crashes of a group at once (a merge) saw the group's rows with crashes still
-- counted and none left in the table: the NULL broke the NOT NULL column and the merge
-- failed. Such a row reaches count 0 and goes before the statement ends.
CREATE OR REPLACE FUNCTION crash_groups_remove(sig TEXT, at BIGINT, prod TEXT, ver TEXT)
RETURNS void AS $$
DECLARE
    d BIGINT := at / 86400000;
BEGIN
    UPDATE crash_groups SET count = count - 1 WHERE signature = sig;
    DELETE FROM crash_groups WHERE signature = sig AND count <= 0;
    UPDATE crash_groups SET
        first_seen = COALESCE((SELECT MIN(received_at) FROM crashes WHERE signature = sig),
                              first_seen),
        last_seen = COALESCE((SELECT MAX(received_at) FROM crashes WHERE signature = sig),
                             last_seen)
    WHERE signature = sig AND (first_seen = at OR last_seen = at);
    UPDATE crash_group_days SET count = count - 1
    WHERE signature = sig AND day = d AND product = COALESCE(prod, '') AND version = COALESCE(ver, '');
    DELETE FROM crash_group_days
    WHERE signature = sig AND day = d AND product = COALESCE(prod, '') AND version = COALESCE(ver, '')
      AND count <= 0;
    UPDATE crash_group_days g SET
        first_seen = COALESCE((SELECT MIN(received_at) FROM crashes WHERE signature = sig
            AND received_at >= d * 86400000 AND received_at < (d + 1) * 86400000
            AND COALESCE(product, '') = g.product AND COALESCE(version, '') = g.version),
            g.first_seen),
        last_seen = COALESCE((SELECT MAX(received_at) FROM crashes WHERE signature = sig
            AND received_at >= d * 86400000 AND received_at < (d + 1) * 86400000
            AND COALESCE(product, '') = g.product AND COALESCE(version, '') = g.version),
            g.last_seen)
    WHERE g.signature = sig AND g.day = d AND g.product = COALESCE(prod, '')
      AND g.version = COALESCE(ver, '') AND (g.first_seen = at OR g.last_seen = at);
END;
$$ LANGUAGE plpgsql;

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
-- Both follow every crash that gains, loses or changes its signature, kind, product or
-- version (first processing, reprocessing, merges, splits, deletes) through the trigger
-- below, as the group rows of 0006 do. A crash moved on an old day updates its group's
-- later days (at most one row per day since).
ALTER TABLE crashes ADD COLUMN analysis_kind TEXT;
UPDATE crashes c SET analysis_kind = a.kind
FROM (SELECT ct.crash_id, MIN(st.term) AS kind FROM crash_terms ct
      JOIN search_terms st ON st.id = ct.term_id
      WHERE st.kind = 'analysis' GROUP BY ct.crash_id) a
WHERE c.id = a.crash_id;

CREATE TABLE crash_group_running (
    scope      TEXT NOT NULL,
    signature  TEXT NOT NULL,
    day        BIGINT NOT NULL,
    count      BIGINT NOT NULL,
    running    BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL,
    PRIMARY KEY (scope, signature, day)
);

CREATE TABLE crash_group_kinds (
    kind      TEXT NOT NULL,
    signature TEXT NOT NULL,
    day       BIGINT NOT NULL,
    product   TEXT NOT NULL,
    version   TEXT NOT NULL,
    count     BIGINT NOT NULL,
    PRIMARY KEY (kind, signature, day, product, version)
);

INSERT INTO crash_group_running (scope, signature, day, count, running, first_seen, last_seen)
SELECT '', signature, day, n, SUM(n) OVER (PARTITION BY signature ORDER BY day), f, l
FROM (SELECT signature, day, SUM(count) AS n, MIN(first_seen) AS f, MAX(last_seen) AS l
      FROM crash_group_days GROUP BY signature, day) d;
INSERT INTO crash_group_running (scope, signature, day, count, running, first_seen, last_seen)
SELECT 'p:' || product, signature, day, n,
       SUM(n) OVER (PARTITION BY product, signature ORDER BY day), f, l
FROM (SELECT product, signature, day, SUM(count) AS n, MIN(first_seen) AS f,
             MAX(last_seen) AS l
      FROM crash_group_days WHERE product <> '' GROUP BY product, signature, day) d;
INSERT INTO crash_group_kinds (kind, signature, day, product, version, count)
SELECT analysis_kind, signature, received_at / 86400000, COALESCE(product, ''),
       COALESCE(version, ''), COUNT(*)
FROM crashes WHERE analysis_kind IS NOT NULL AND analysis_kind <> ''
  AND signature IS NOT NULL AND signature <> ''
GROUP BY analysis_kind, signature, received_at / 86400000, COALESCE(product, ''),
         COALESCE(version, '');

-- One crash entering (delta 1) or leaving (delta -1) the rollups: its running counts
-- when `with_running` (its group changed), its kind row when it has a kind.
CREATE FUNCTION crash_rollups_move(sig TEXT, at BIGINT, prod TEXT, ver TEXT, knd TEXT,
                                   with_running BOOLEAN, delta INT) RETURNS void AS $$
DECLARE
    d BIGINT := at / 86400000;
    s TEXT;
BEGIN
    IF with_running THEN
        FOREACH s IN ARRAY CASE WHEN COALESCE(prod, '') <> '' THEN ARRAY['', 'p:' || prod]
                                ELSE ARRAY[''] END LOOP
            UPDATE crash_group_running SET running = running + delta
            WHERE scope = s AND signature = sig AND day > d;
            IF delta > 0 THEN
                INSERT INTO crash_group_running
                    (scope, signature, day, count, running, first_seen, last_seen)
                VALUES (s, sig, d, 1, COALESCE((SELECT r.running FROM crash_group_running r
                    WHERE r.scope = s AND r.signature = sig AND r.day < d
                    ORDER BY r.day DESC LIMIT 1), 0) + 1, at, at)
                ON CONFLICT (scope, signature, day) DO UPDATE SET
                    count = crash_group_running.count + 1,
                    running = crash_group_running.running + 1,
                    first_seen = LEAST(crash_group_running.first_seen, EXCLUDED.first_seen),
                    last_seen = GREATEST(crash_group_running.last_seen, EXCLUDED.last_seen);
            ELSE
                UPDATE crash_group_running SET count = count - 1, running = running - 1
                WHERE scope = s AND signature = sig AND day = d;
                DELETE FROM crash_group_running
                WHERE scope = s AND signature = sig AND day = d AND count <= 0;
                UPDATE crash_group_running g SET
                    first_seen = COALESCE((SELECT MIN(c.received_at) FROM crashes c
                        WHERE c.signature = sig AND c.received_at >= d * 86400000
                          AND c.received_at < (d + 1) * 86400000
                          AND (s = '' OR c.product = prod)), g.first_seen),
                    last_seen = COALESCE((SELECT MAX(c.received_at) FROM crashes c
                        WHERE c.signature = sig AND c.received_at >= d * 86400000
                          AND c.received_at < (d + 1) * 86400000
                          AND (s = '' OR c.product = prod)), g.last_seen)
                WHERE g.scope = s AND g.signature = sig AND g.day = d
                  AND (g.first_seen = at OR g.last_seen = at);
            END IF;
        END LOOP;
    END IF;
    IF COALESCE(knd, '') <> '' THEN
        IF delta > 0 THEN
            INSERT INTO crash_group_kinds (kind, signature, day, product, version, count)
            VALUES (knd, sig, d, COALESCE(prod, ''), COALESCE(ver, ''), 1)
            ON CONFLICT (kind, signature, day, product, version) DO UPDATE SET
                count = crash_group_kinds.count + 1;
        ELSE
            UPDATE crash_group_kinds SET count = count - 1
            WHERE kind = knd AND signature = sig AND day = d
              AND product = COALESCE(prod, '') AND version = COALESCE(ver, '');
            DELETE FROM crash_group_kinds
            WHERE kind = knd AND signature = sig AND day = d
              AND product = COALESCE(prod, '') AND version = COALESCE(ver, '') AND count <= 0;
        END IF;
    END IF;
END;
$$ LANGUAGE plpgsql;

-- Keeps the rollups in step with crashes: the crash leaves what it was in, then enters
-- what it is in (its running counts only when its group, product or version changed).
CREATE FUNCTION crash_rollups_follow() RETURNS trigger AS $$
DECLARE
    moved BOOLEAN := TG_OP <> 'UPDATE';
BEGIN
    IF TG_OP = 'UPDATE' THEN
        moved := OLD.signature IS DISTINCT FROM NEW.signature
            OR OLD.product IS DISTINCT FROM NEW.product
            OR OLD.version IS DISTINCT FROM NEW.version;
        IF NOT moved AND OLD.analysis_kind IS NOT DISTINCT FROM NEW.analysis_kind THEN
            RETURN NULL;
        END IF;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.signature <> '' THEN
        PERFORM crash_rollups_move(OLD.signature, OLD.received_at, OLD.product, OLD.version,
                                   OLD.analysis_kind, moved, -1);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.signature <> '' THEN
        PERFORM crash_rollups_move(NEW.signature, NEW.received_at, NEW.product, NEW.version,
                                   NEW.analysis_kind, moved, 1);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_rollups_follow
AFTER INSERT OR DELETE OR UPDATE OF signature, analysis_kind, product, version
ON crashes FOR EACH ROW EXECUTE FUNCTION crash_rollups_follow();
