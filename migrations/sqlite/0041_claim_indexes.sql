-- The queue's own indexes (issue 40; keep in step with ../postgres/0041_claim_indexes.sql):
-- the crashes a claim can take, in the order it takes them, and the leases that can
-- expire, each a partial index of the few rows that are not finished.
--
-- A claim (worker/src/store/crashes.rs, claim_in) leases the first pending crashes by
-- (priority, received_at, id), after failing the processing ones whose attempts ran out.
-- Both statements filter on `status`, whose index (0015's crashes_claim, 0001's
-- crashes_queue) SQLite's planner passes over once its statistics (`PRAGMA optimize`)
-- see a column of three values: it scanned every crash and sorted the pending ones, on
-- each claim. With 2,000 queued among 2,500 stored, the claim's two statements took 2.0
-- and 1.8 ms each (0.5 ms a crash in batches of 8, more than the walk's 0.25 ms), and
-- the cost grows with the store, finished crashes included. These indexes hold only the
-- rows a claim looks for, so they are small whatever the store's size, and the claim's
-- statements name their condition, which makes them usable on both databases.
CREATE INDEX crashes_claimable ON crashes (priority, received_at, id)
    WHERE status IN ('pending', 'processing');
CREATE INDEX crashes_leased ON crashes (lease_until) WHERE status = 'processing';
