-- Batch reprocessing (`postmortem reprocess`, POST /api/v1/reprocess); keep the sqlite and
-- postgres files in step.

-- The signature and the number of frames with a function name the crash had before it
-- was last queued again, so the dashboard can show "signature changed" and a run can
-- count crashes that gained symbolized frames.
ALTER TABLE crashes ADD COLUMN previous_signature TEXT;
ALTER TABLE crashes ADD COLUMN function_frames BIGINT;
ALTER TABLE crashes ADD COLUMN previous_function_frames BIGINT;
-- The reprocess run that last queued the crash: a resumed run skips the crashes it
-- already queued, so none is processed twice by one run.
ALTER TABLE crashes ADD COLUMN reprocess_run TEXT;
CREATE INDEX crashes_reprocess_run ON crashes (reprocess_run, status);

-- One row per run: a run started again with the same filter resumes the unfinished one.
CREATE TABLE reprocess_runs (
    id          TEXT PRIMARY KEY NOT NULL,
    filter      TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX reprocess_runs_filter ON reprocess_runs (filter, finished_at);
