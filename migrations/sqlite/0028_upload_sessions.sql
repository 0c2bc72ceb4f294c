-- Upload sessions kept in the store (issue 42), so that a resumable upload survives a
-- restart of the server (or reaches another server on the same database): one row per
-- open session, and one per chunk received, whose bytes are a blob (the sweep keeps
-- blobs these rows name). `staged` is the sum of the session's chunks' sizes: the
-- offset the next chunk starts at. `received` counts every byte the chunks' requests
-- brought. A session past `expires_at` is removed with its chunks.
CREATE TABLE upload_sessions (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    -- the project its file is stored in (issue 41)
    project TEXT NOT NULL,
    file_name TEXT,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    encoding TEXT NOT NULL,
    compressed_size BIGINT NOT NULL,
    compressed_sha256 TEXT NOT NULL,
    source_bundle TEXT,
    staged BIGINT NOT NULL,
    received BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX upload_sessions_owner ON upload_sessions (owner);
CREATE INDEX upload_sessions_expires_at ON upload_sessions (expires_at);
CREATE TABLE upload_session_chunks (
    session_id TEXT NOT NULL,
    start_offset BIGINT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (session_id, start_offset)
);
CREATE INDEX upload_session_chunks_sha256 ON upload_session_chunks (sha256);
