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
