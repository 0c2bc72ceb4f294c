-- The queue's counts by status, followed by a row trigger that fires only when a crash's
-- status changes (issue 40; ../sqlite/0036_status_counts_by_row.sql says why SQLite's
-- triggers stay as they are).
--
-- 0034 followed updates with a statement trigger whose transition tables capture every
-- row an UPDATE of crashes touches, whatever it changes: a finished batch's rows with
-- their reports, and the leases' renewals, which change no status at all. Here a row
-- trigger `AFTER UPDATE OF status` whose `WHEN` keeps it from running unless the status
-- changed: an update that changes no status costs nothing, one that does costs one upsert
-- of two counts (its old status minus one, its new one plus one). The shards are 0034's:
-- each connection writes only its own (its backend's pid), so no two transactions ever
-- write the same count row. Inserts and deletes keep 0034's statement triggers (an
-- insert of many crashes is one upsert per status).
DROP TRIGGER crash_status_counts_update ON crashes;

CREATE FUNCTION crash_status_counts_move() RETURNS trigger AS $$
BEGIN
    -- two different statuses (the trigger's WHEN): two rows, never the same one twice
    INSERT INTO crash_status_counts (status, shard, count)
    VALUES (OLD.status, pg_backend_pid(), -1), (NEW.status, pg_backend_pid(), 1)
    ON CONFLICT (status, shard) DO UPDATE SET
        count = crash_status_counts.count + excluded.count;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_status_counts_update AFTER UPDATE OF status ON crashes
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
EXECUTE FUNCTION crash_status_counts_move();
