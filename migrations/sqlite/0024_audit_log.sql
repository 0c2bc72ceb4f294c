-- The audit log (issue 41): deletions and token use, one row each. `token` is the
-- token's label (the first 12 hex digits of the SHA-256 of its secret, or `none` on a
-- server without tokens): never the secret. `target` is what was acted on (a crash id).
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY,
    at      BIGINT NOT NULL,
    token   TEXT NOT NULL,
    project TEXT,
    action  TEXT NOT NULL,
    route   TEXT NOT NULL,
    target  TEXT
);
CREATE INDEX audit_log_at ON audit_log (at);
