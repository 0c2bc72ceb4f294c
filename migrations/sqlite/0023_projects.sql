-- Projects (issue 41; keep in step with ../postgres/0023_projects.sql): many
-- teams on one server. Every crash belongs to one project, and every read of crashes
-- filters by the caller's project (a project token sees its own only).
--
-- This migration is what `postmortem migrate` does to a single-space installation:
-- the `default` project is created and every existing crash belongs to it (the column's
-- default), so a server upgraded without project tokens works as before.
--
-- The search and module indexes (0007, 0021) are read through their join with
-- `crashes`, whose project column filters them; they need no column of their own.
CREATE TABLE projects (
    name       TEXT PRIMARY KEY NOT NULL,
    created_at BIGINT NOT NULL
);
INSERT INTO projects (name, created_at) VALUES ('default', 0);

ALTER TABLE crashes ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
-- The crash list of one project, newest first.
CREATE INDEX crashes_project_newest ON crashes (project, received_at DESC, id DESC);

-- An Idempotency-Key names one crash of a project: another project's key of the same
-- text is another crash (and never tells that project the first one exists).
DROP INDEX crashes_idempotency_key;
CREATE UNIQUE INDEX crashes_idempotency_key ON crashes (project, idempotency_key);
