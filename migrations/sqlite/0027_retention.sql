-- Retention, sampling per signature and disk used per project (issue 41; keep in step
-- with ../postgres/0027_retention.sql).
--
-- A crash's dump can go while its row and report stay: removed after the project's
-- retention (`retention`) or kept out by its sampling per signature (`sampled`).
-- `dump_gone` says why (NULL: the dump is kept), `dump_gone_at` when. A crash whose dump
-- is gone no longer names its blob (`crashes::blob_is_named`), and is never queued again.
ALTER TABLE crashes ADD COLUMN dump_gone TEXT;
ALTER TABLE crashes ADD COLUMN dump_gone_at BIGINT;

-- When a project last used a symbol file: set when the project's crash is processed
-- with it, and when the project uploads it. The retention of symbol files removes a
-- project's hold on a file unused for its days; the file goes when no project holds it.
ALTER TABLE binary_projects ADD COLUMN last_used_at BIGINT NOT NULL DEFAULT 0;
UPDATE binary_projects SET last_used_at =
    COALESCE((SELECT uploaded_at FROM binaries WHERE binaries.sha256 = binary_projects.sha256), 0);

-- The retention and the sampling read one project's crashes by age.
CREATE INDEX crashes_project_dump_kept ON crashes (project, received_at) WHERE dump_gone IS NULL;
-- The counts of dumps removed, per project and reason (`/metrics`, the dashboard).
CREATE INDEX crashes_project_dump_gone ON crashes (project, dump_gone) WHERE dump_gone IS NOT NULL;
