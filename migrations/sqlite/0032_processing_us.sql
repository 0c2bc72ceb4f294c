-- A crash's processing time in microseconds (issue 40; keep in step with
-- ../postgres/0031_processing_us.sql).
--
-- `processing_ms` (0001) is whole milliseconds: a job of the warm pipeline takes about
-- one, so its p50 was 0 or 1 and any figure derived from it meaningless. The worker
-- measures the job's own time (from its start to its report, not the wait behind the
-- jobs of its batch) and writes both; rows finished before this migration have none.
ALTER TABLE crashes ADD COLUMN processing_us BIGINT;
