-- What storing a crash writes (issue 40; keep in step with ../sqlite/0031_store_write_cost.sql).
--
-- `crashes_signature (signature)` is the first column of `crashes_groups (signature,
-- received_at)` and of `crashes_signature_newest`: every lookup by signature is served
-- as well by either. An update of a crash that changes an indexed column (its status,
-- its signature) writes an entry in every index of `crashes`, three times per crash
-- (its insert, its lease, its report): one index fewer is three entries fewer per crash.
-- (SQLite's 0031 also stops its product trigger rewriting each new row; PostgreSQL's
-- trigger sets them before the insert already.)
DROP INDEX crashes_signature;

-- The reprocess selection of a signature (`store::reprocess`: done or failed, dump kept,
-- not yet queued by the run) counted from an index alone, instead of reading each of
-- the signature's crashes; a crash enters it once, when it is finished. On SQLite the
-- columns read after a crash's report are behind its overflow pages: at 100,000 crashes
-- the hot signature's selection took 108 ms, about ten times that at a million.
CREATE INDEX crashes_reprocessable ON crashes (signature, reprocess_run, status, dump_gone)
WHERE status IN ('done', 'failed') AND dump_gone IS NULL;
