-- The crash list of one analysis kind, newest first (issue 40; keep in step with
-- ../sqlite/0036_kind_newest.sql): `/crashes?kind=K` walks
-- this index from its newest crash of kind K and stops at the page's last, whether the
-- kind is in every crash or in a few. Through the search terms (0007's `crash_terms`,
-- `kind = 'analysis'`) both databases first built the whole set of the kind's crashes:
-- 125 ms on SQLite and 347-816 ms on PostgreSQL for a kind every crash has, at 250,000
-- and 480,000 crashes. `analysis_kind` (0021) is the same term, written by the same
-- finish of a job.
CREATE INDEX crashes_kind_newest ON crashes (analysis_kind, received_at DESC, id DESC);
