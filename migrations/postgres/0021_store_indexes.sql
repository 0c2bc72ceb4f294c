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
