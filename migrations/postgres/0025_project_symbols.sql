-- Symbol files per project (issue 41; keep in step with ../sqlite/0025_project_symbols.sql).
--
-- A file's bytes are stored once (`binaries`, keyed by sha256, and one blob), and
-- `binary_projects` says which projects hold it: one row per project that uploaded it,
-- and the row of the project `*` (no project is named so) once an admin marked it
-- shared, or for a file fetched from a remote source. A crash of project P is
-- symbolized with P's files and the shared ones, never with another project's
-- (`worker::store::binaries::visible`).
CREATE TABLE binary_projects (
    sha256  TEXT NOT NULL,
    project TEXT NOT NULL,
    PRIMARY KEY (sha256, project)
);
CREATE INDEX binary_projects_project ON binary_projects (project, sha256);

-- What the files stored so far become: they served every crash, so they stay shared,
-- and the uploaded ones belong to `default` (as its crashes do since 0023).
INSERT INTO binary_projects (sha256, project)
    SELECT sha256, 'default' FROM binaries WHERE source IS NULL;
INSERT INTO binary_projects (sha256, project) SELECT sha256, '*' FROM binaries;

-- First upload wins within a project (0018's claims, now with the project in the key):
-- a project's upload of a build-id another project holds is stored beside it, never
-- refused and never in its place. Fetched files claim under `*`.
ALTER TABLE binary_claims ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
UPDATE binary_claims SET project = '*'
    WHERE sha256 IN (SELECT sha256 FROM binaries WHERE source IS NOT NULL);
ALTER TABLE binary_claims ALTER COLUMN project DROP DEFAULT;
ALTER TABLE binary_claims DROP CONSTRAINT binary_claims_pkey;
ALTER TABLE binary_claims ADD PRIMARY KEY (project, format, role, identity);
