-- Deletion by filter and source bundles per project (issue 41; keep in step with the
-- other dialect's 0030_delete_filter_bundle_projects.sql).
--
-- A deletion by filter (`POST /api/v1/crashes/delete`) records its filter (JSON text)
-- beside each crash it deleted.
ALTER TABLE audit_log ADD COLUMN detail TEXT;

-- Source bundles belong to the project that uploaded them, as symbol files do since
-- 0025: one row per (project, build-id), `*` (no project is named so) for a bundle an
-- admin shared with every project. The bytes stay one blob whichever projects hold them
-- (`sha256`). A crash of project P reads P's bundle of a build-id, else the shared one
-- (`worker::store::source_bundles`); first upload wins within a project only.
CREATE TABLE source_bundles_by_project (
    project     TEXT NOT NULL,
    build_id    TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    size        BIGINT NOT NULL,
    file_count  BIGINT NOT NULL,
    uploaded_at BIGINT NOT NULL,
    PRIMARY KEY (project, build_id)
);
-- The bundles stored so far served every crash: they belong to `default` (as every
-- earlier crash and symbol file does) and stay shared.
INSERT INTO source_bundles_by_project (project, build_id, sha256, size, file_count, uploaded_at)
    SELECT 'default', build_id, sha256, size, file_count, uploaded_at FROM source_bundles;
INSERT INTO source_bundles_by_project (project, build_id, sha256, size, file_count, uploaded_at)
    SELECT '*', build_id, sha256, size, file_count, uploaded_at FROM source_bundles;
DROP TABLE source_bundles;
ALTER TABLE source_bundles_by_project RENAME TO source_bundles;
CREATE INDEX source_bundles_sha256 ON source_bundles (sha256);
CREATE INDEX source_bundles_build_id ON source_bundles (build_id);

-- A late bundle's requeue remembered for later (0029) is the holder's: the crashes of
-- the project that uploaded it, or of every project for a shared one (`*`, which the
-- rows remembered so far become: their bundles are shared now).
CREATE TABLE requeue_backlog_by_project (
    project     TEXT NOT NULL,
    build_id    TEXT NOT NULL,
    since       BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (project, build_id)
);
INSERT INTO requeue_backlog_by_project (project, build_id, since, recorded_at)
    SELECT '*', build_id, since, recorded_at FROM requeue_backlog;
DROP TABLE requeue_backlog;
ALTER TABLE requeue_backlog_by_project RENAME TO requeue_backlog;
