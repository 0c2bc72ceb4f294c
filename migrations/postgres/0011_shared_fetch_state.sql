-- Remote symbol sources shared by every worker of one database (issue 19, caching): a
-- source's answer "not found" for a file, kept until `expires_at` (now + the miss TTL)
-- so that no worker asks it again before, and a claim on a file being fetched, held by
-- one worker until `expires_at` (renewed while it downloads, so a crashed worker's claim
-- lapses) so that one worker downloads it and the others wait for its upload. Expired
-- rows are swept. `kind` is the file asked (`executable`, `debuginfo`, `sym`, `symsrv`),
-- `id` its identity in the layout (a build-id, a store path, `NAME/ID`).
CREATE TABLE source_misses (
    source     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    id         TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (source, kind, id)
);
CREATE INDEX source_misses_expires_at ON source_misses (expires_at);

CREATE TABLE fetch_claims (
    id         TEXT PRIMARY KEY NOT NULL,
    holder     TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX fetch_claims_expires_at ON fetch_claims (expires_at);
