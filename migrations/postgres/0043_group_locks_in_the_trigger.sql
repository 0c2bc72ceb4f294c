-- A batch's store takes its groups' advisory locks inside its `UPDATE`, right before its
-- crashes enter their groups, not before the statement (issue 40; PostgreSQL only).
--
-- Two stores that add to one group at once must not interleave: 0042's statement trigger
-- reads a day's running count as it stood before the statement, and two stores creating
-- the same new groups in different orders deadlocked (docs/performance.md, "The fill").
-- `finish_batch` therefore took one `pg_advisory_xact_lock` per signature, in key order,
-- before its `UPDATE` and held them to its commit. A crash storm is one signature: the
-- locks were held through the whole `UPDATE` (the reports' text, ~20 indexes: 30–47 ms a
-- batch of 32), and every other worker's store of that storm waited for all of it.
--
-- For a batch of first reports (crashes that had no signature), 0042's `crash_groups_added`
-- is the only thing that touches group rows, and it runs after the statement's rows are
-- written. The locks are now taken there: by a statement trigger named to sort before it
-- (PostgreSQL fires the triggers of one event in the order of their names), over the same
-- crashes, keyed by `hashtextextended(signature, 0)`, in ascending key order. Two stores
-- write their reports at the same time and wait for each other only for the groups' rows.
--
-- A batch holding a crash that already had a signature (a reprocessed crash) moves it
-- through 0026's row triggers, which fire before any statement trigger: `finish_batch`
-- takes those batches' locks before the `UPDATE`, as before, with the same keys (a lock
-- taken twice by one transaction is taken once more, not waited for).
CREATE FUNCTION crash_groups_lock() RETURNS trigger AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(k)
    FROM (SELECT DISTINCT hashtextextended(n.signature, 0) AS k
          FROM new_rows n JOIN old_rows o ON o.id = n.id
          WHERE COALESCE(o.signature, '') = '' AND COALESCE(n.signature, '') <> ''
          ORDER BY 1) keys;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_groups_0_locks
AFTER UPDATE ON crashes REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION crash_groups_lock();
