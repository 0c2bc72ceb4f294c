-- New crashes before reprocessing (issue 34, finding 5): a symbol upload that requeued
-- two thousand stored crashes made every new crash wait behind them in the one queue.
-- `priority` 0 is a new crash (the default), 1 a crash queued again (a file it missed
-- arrived, a reprocess run, the dashboard's Reprocess); workers claim by priority, then
-- by age. A crash already pending is never queued twice.
ALTER TABLE crashes ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
CREATE INDEX crashes_claim ON crashes (status, priority, received_at, id);
