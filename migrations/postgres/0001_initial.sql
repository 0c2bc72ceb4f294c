-- postmortem schema, PostgreSQL dialect (keep in step with ../sqlite/0001_initial.sql).
-- Times are Unix milliseconds (BIGINT) so both dialects share one representation.

-- Uploaded binaries and debug files, content-addressed; several files may share a build-id
-- (a stripped library and its debug file).
CREATE TABLE binaries (
    sha256      TEXT PRIMARY KEY NOT NULL,
    build_id    TEXT NOT NULL,
    arch        TEXT,
    kind        TEXT NOT NULL,
    file_name   TEXT,
    size        BIGINT NOT NULL,
    sections    TEXT NOT NULL,
    uploaded_at BIGINT NOT NULL
);
CREATE INDEX binaries_build_id ON binaries (build_id);

-- Crashes; this table is also the job queue (status + lease).
CREATE TABLE crashes (
    id            TEXT PRIMARY KEY NOT NULL,
    status        TEXT NOT NULL,
    received_at   BIGINT NOT NULL,
    dump_sha256   TEXT NOT NULL,
    dump_size     BIGINT NOT NULL,
    dump_format   TEXT NOT NULL,
    annotations   TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    lease_until   BIGINT,
    leased_by     TEXT,
    error         TEXT,
    report        TEXT,
    signature     TEXT,
    started_at    BIGINT,
    finished_at   BIGINT,
    processing_ms BIGINT
);
CREATE INDEX crashes_queue ON crashes (status, received_at);
CREATE INDEX crashes_newest ON crashes (received_at DESC, id DESC);
CREATE INDEX crashes_signature ON crashes (signature);

-- Unwind and symbol tables, built once per (build-id, kind, format version).
CREATE TABLE tables (
    build_id   TEXT NOT NULL,
    kind       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    bytes      BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (build_id, kind, version)
);

-- Which crashes needed a build-id no binary was uploaded for.
CREATE TABLE missing_modules (
    build_id    TEXT NOT NULL,
    crash_id    TEXT NOT NULL,
    module_name TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (build_id, crash_id)
);
CREATE INDEX missing_modules_crash ON missing_modules (crash_id);
