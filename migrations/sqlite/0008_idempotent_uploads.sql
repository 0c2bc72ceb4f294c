-- Idempotent uploads (issue 16 point 8): a client's Idempotency-Key names one crash, so a
-- retry after a lost answer finds the first upload instead of storing a second one; and
-- the same dump bytes within a window are found by their sha256. The sweep of orphan
-- blobs asks whether a crash names a blob by the same index.
ALTER TABLE crashes ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX crashes_idempotency_key ON crashes (idempotency_key);
CREATE INDEX crashes_dump_sha256 ON crashes (dump_sha256, received_at);
