-- Source bundles (issue 42): the source files one build's line tables name, zipped by
-- `postmortem upload --include-sources` and stored as a blob, one per build-id (the
-- first upload wins: a build's sources do not change). The worker gives each report's
-- frames their source lines from the bundles of its modules' build-ids, and the
-- debuginfod route `GET /buildid/ID/source/PATH` serves their files.
CREATE TABLE source_bundles (
    build_id TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    size BIGINT NOT NULL,
    file_count BIGINT NOT NULL,
    uploaded_at BIGINT NOT NULL
);
CREATE INDEX source_bundles_sha256 ON source_bundles (sha256);
