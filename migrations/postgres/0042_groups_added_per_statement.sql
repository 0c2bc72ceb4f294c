-- A batch's reports enter their groups once per statement, not once per crash (issue 40;
-- PostgreSQL only: ../sqlite/0042_groups_added_per_statement.sql says why).
--
-- A worker stores a batch's reports with one `UPDATE` of `crashes` (`finish_batch`), and
-- 0026's row triggers then moved each crash into its group's rows one at a time: ten
-- statements a crash (the group, its day, the running counts of three scopes, the kind),
-- ~1 ms a crash of the store's 31.7 ms per batch, all of it inside the groups' locks that
-- the next batch of the same groups waits for (docs/performance.md, "A crash storm's
-- group lock"). A crash storm is one group: the batches waited for each other's triggers.
--
-- Here the crashes an `UPDATE` gives their first signature (it had none: the store of a
-- first report) enter their groups through one trigger per statement, which reads them
-- from the statement's transition tables and adds each group, day, running count and kind
-- once, with the number of the statement's crashes there. Every other change of a crash's
-- group (a reprocessed crash moving, a merge, a pin, an insert, a delete) still goes
-- through 0026's row functions, whose triggers now skip the crashes the statement
-- trigger takes. The rows kept are the same (worker/tests/rollups.rs checks both paths
-- against the rows recomputed from the crashes).

DROP TRIGGER crash_groups_follow ON crashes;
DROP TRIGGER crash_rollups_follow ON crashes;

-- 0026's row triggers, for inserts and deletes as before, and for updates of a crash that
-- already had a signature (what leaves a group, or moves within one).
CREATE TRIGGER crash_groups_follow
AFTER INSERT OR DELETE ON crashes FOR EACH ROW EXECUTE FUNCTION crash_groups_follow();

CREATE TRIGGER crash_groups_follow_moved
AFTER UPDATE OF signature, product, version, project ON crashes FOR EACH ROW
WHEN (COALESCE(OLD.signature, '') <> '')
EXECUTE FUNCTION crash_groups_follow();

CREATE TRIGGER crash_rollups_follow
AFTER INSERT OR DELETE ON crashes FOR EACH ROW EXECUTE FUNCTION crash_rollups_follow();

CREATE TRIGGER crash_rollups_follow_moved
AFTER UPDATE OF signature, analysis_kind, product, version, project ON crashes FOR EACH ROW
WHEN (COALESCE(OLD.signature, '') <> '')
EXECUTE FUNCTION crash_rollups_follow();

-- The crashes of an `UPDATE` that had no signature and have one now, added to their groups
-- (what 0026's `crash_groups_add` and `crash_rollups_move(…, true, 1)` did for each).
--
-- The running counts: a day row's `running` counts the scope's crashes up to and including
-- its day. A day row that exists gains the statement's crashes of that day and before; a
-- new one starts from the running count of the last day before it (as it stood before the
-- statement) plus the statement's crashes up to its day. Both are written by one
-- statement, whose parts read the table as it was before it: the update never sees the
-- rows the insert makes. A store takes its groups' advisory locks before its `UPDATE`
-- (`group_locks_sql`), so no other store adds to these groups meanwhile.
CREATE FUNCTION crash_groups_added() RETURNS trigger AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows n JOIN old_rows o ON o.id = n.id
                   WHERE COALESCE(o.signature, '') = '' AND COALESCE(n.signature, '') <> '')
    THEN
        RETURN NULL;
    END IF;

    INSERT INTO crash_groups (project, signature, count, first_seen, last_seen)
    SELECT n.project, n.signature, COUNT(*), MIN(n.received_at), MAX(n.received_at)
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE COALESCE(o.signature, '') = '' AND COALESCE(n.signature, '') <> ''
    GROUP BY n.project, n.signature
    ORDER BY n.project, n.signature
    ON CONFLICT (project, signature) DO UPDATE SET
        count = crash_groups.count + EXCLUDED.count,
        first_seen = LEAST(crash_groups.first_seen, EXCLUDED.first_seen),
        last_seen = GREATEST(crash_groups.last_seen, EXCLUDED.last_seen);

    INSERT INTO crash_group_days (project, signature, day, product, version, count,
                                  first_seen, last_seen)
    SELECT n.project, n.signature, n.received_at / 86400000, COALESCE(n.product, ''),
           COALESCE(n.version, ''), COUNT(*), MIN(n.received_at), MAX(n.received_at)
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE COALESCE(o.signature, '') = '' AND COALESCE(n.signature, '') <> ''
    GROUP BY 1, 2, 3, 4, 5
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (project, signature, day, product, version) DO UPDATE SET
        count = crash_group_days.count + EXCLUDED.count,
        first_seen = LEAST(crash_group_days.first_seen, EXCLUDED.first_seen),
        last_seen = GREATEST(crash_group_days.last_seen, EXCLUDED.last_seen);

    WITH added AS (
        SELECT n.* FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE COALESCE(o.signature, '') = '' AND COALESCE(n.signature, '') <> ''
    ), scoped AS (
        SELECT project, '' AS scope, signature, received_at FROM added
        UNION ALL
        SELECT project, 'p:' || product, signature, received_at FROM added
        WHERE COALESCE(product, '') <> ''
        UNION ALL
        SELECT project, 'v:' || version, signature, received_at FROM added
        WHERE COALESCE(version, '') <> ''
    ), days AS (
        SELECT project, scope, signature, received_at / 86400000 AS day, COUNT(*) AS n,
               MIN(received_at) AS f, MAX(received_at) AS l
        FROM scoped GROUP BY 1, 2, 3, 4
    ), upto AS (
        SELECT d.*, SUM(d.n) OVER (PARTITION BY project, scope, signature ORDER BY day)
                        AS through
        FROM days d
    ), grown AS (
        UPDATE crash_group_running g SET
            running = g.running + x.before_or_on,
            count = g.count + x.on_day,
            first_seen = LEAST(g.first_seen, x.f),
            last_seen = GREATEST(g.last_seen, x.l)
        FROM (SELECT r.project, r.scope, r.signature, r.day, SUM(d.n) AS before_or_on,
                     COALESCE(SUM(d.n) FILTER (WHERE d.day = r.day), 0) AS on_day,
                     MIN(d.f) FILTER (WHERE d.day = r.day) AS f,
                     MAX(d.l) FILTER (WHERE d.day = r.day) AS l
              FROM crash_group_running r
              JOIN days d ON d.project = r.project AND d.scope = r.scope
                         AND d.signature = r.signature AND d.day <= r.day
              GROUP BY r.project, r.scope, r.signature, r.day) x
        WHERE g.project = x.project AND g.scope = x.scope AND g.signature = x.signature
          AND g.day = x.day
        RETURNING 1
    )
    INSERT INTO crash_group_running (project, scope, signature, day, count, running,
                                     first_seen, last_seen)
    SELECT u.project, u.scope, u.signature, u.day, u.n,
           COALESCE((SELECT r.running FROM crash_group_running r
                     WHERE r.project = u.project AND r.scope = u.scope
                       AND r.signature = u.signature AND r.day < u.day
                     ORDER BY r.day DESC LIMIT 1), 0) + u.through,
           u.f, u.l
    FROM upto u
    WHERE NOT EXISTS (SELECT 1 FROM crash_group_running r
                      WHERE r.project = u.project AND r.scope = u.scope
                        AND r.signature = u.signature AND r.day = u.day)
    ORDER BY 1, 2, 3, 4;

    INSERT INTO crash_group_kinds (project, kind, signature, day, product, version, count)
    SELECT n.project, n.analysis_kind, n.signature, n.received_at / 86400000,
           COALESCE(n.product, ''), COALESCE(n.version, ''), COUNT(*)
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE COALESCE(o.signature, '') = '' AND COALESCE(n.signature, '') <> ''
      AND COALESCE(n.analysis_kind, '') <> ''
    GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (project, kind, signature, day, product, version) DO UPDATE SET
        count = crash_group_kinds.count + EXCLUDED.count;

    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_groups_added
AFTER UPDATE ON crashes REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION crash_groups_added();
