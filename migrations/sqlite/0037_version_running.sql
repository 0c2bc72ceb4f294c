-- A version's running counts (issue 40; keep in step with ../postgres/0037_version_running.sql).
--
-- The groups page of one version (`/?days=90&version=1.3`) summed the window's
-- `crash_group_days` rows of that version for every group: at a million crashes of 5,000
-- signatures over 90 days and ten versions, 367 ms on SQLite and 452 ms on PostgreSQL
-- (docs/performance.md), where a product's page, read from the running counts of the
-- product's scope (0021, 0026), took a few milliseconds. Here a third scope, 'v:' and the
-- version (every product of the group), kept by 0026's rollup trigger as the other two
-- are, and filled from `crash_group_days` as 0026 filled those.
--
-- A page of one product and one version still sums that product's and version's day rows
-- (a few of them: the version's share of the product's).

INSERT INTO crash_group_running (project, scope, signature, day, count, running, first_seen,
                                 last_seen)
SELECT project, 'v:' || version, signature, day, n,
       SUM(n) OVER (PARTITION BY project, version, signature ORDER BY day), f, l
FROM (SELECT project, version, signature, day, SUM(count) AS n, MIN(first_seen) AS f,
             MAX(last_seen) AS l
      FROM crash_group_days WHERE version <> '' GROUP BY project, version, signature, day);

-- 0026's trigger with the version's scope beside the product's.
DROP TRIGGER crash_rollup_move;
CREATE TRIGGER crash_rollup_move INSTEAD OF INSERT ON crash_rollup_moves
BEGIN
    UPDATE crash_group_running SET running = running + NEW.delta
    WHERE NEW.running = 1 AND project = NEW.project
      AND scope IN ('', 'p:' || NULLIF(NEW.product, ''), 'v:' || NULLIF(NEW.version, ''))
      AND signature = NEW.signature AND day > NEW.at / 86400000;
    INSERT INTO crash_group_running (project, scope, signature, day, count, running,
                                     first_seen, last_seen)
    SELECT NEW.project, s.scope, NEW.signature, NEW.at / 86400000, 1,
        COALESCE((SELECT r.running FROM crash_group_running r WHERE r.project = NEW.project
            AND r.scope = s.scope AND r.signature = NEW.signature AND r.day < NEW.at / 86400000
            ORDER BY r.day DESC LIMIT 1), 0) + 1,
        NEW.at, NEW.at
    FROM (SELECT '' AS scope UNION ALL SELECT 'p:' || NEW.product WHERE NEW.product <> ''
          UNION ALL SELECT 'v:' || NEW.version WHERE NEW.version <> '') s
    WHERE NEW.running = 1 AND NEW.delta > 0
    ON CONFLICT (project, scope, signature, day) DO UPDATE SET count = count + 1,
        running = running + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
    UPDATE crash_group_running SET count = count - 1, running = running - 1
    WHERE NEW.running = 1 AND NEW.delta < 0 AND project = NEW.project
      AND scope IN ('', 'p:' || NULLIF(NEW.product, ''), 'v:' || NULLIF(NEW.version, ''))
      AND signature = NEW.signature AND day = NEW.at / 86400000;
    DELETE FROM crash_group_running
    WHERE NEW.running = 1 AND NEW.delta < 0 AND project = NEW.project
      AND scope IN ('', 'p:' || NULLIF(NEW.product, ''), 'v:' || NULLIF(NEW.version, ''))
      AND signature = NEW.signature AND day = NEW.at / 86400000 AND count <= 0;
    UPDATE crash_group_running SET
        first_seen = (SELECT MIN(c.received_at) FROM crashes c
            WHERE c.signature = NEW.signature AND c.project = NEW.project
              AND c.received_at >= day * 86400000 AND c.received_at < (day + 1) * 86400000
              AND (crash_group_running.scope = '' OR 'p:' || c.product = crash_group_running.scope
                   OR 'v:' || c.version = crash_group_running.scope)),
        last_seen = (SELECT MAX(c.received_at) FROM crashes c
            WHERE c.signature = NEW.signature AND c.project = NEW.project
              AND c.received_at >= day * 86400000 AND c.received_at < (day + 1) * 86400000
              AND (crash_group_running.scope = '' OR 'p:' || c.product = crash_group_running.scope
                   OR 'v:' || c.version = crash_group_running.scope))
    WHERE NEW.running = 1 AND NEW.delta < 0 AND project = NEW.project
      AND scope IN ('', 'p:' || NULLIF(NEW.product, ''), 'v:' || NULLIF(NEW.version, ''))
      AND signature = NEW.signature AND day = NEW.at / 86400000
      AND (first_seen = NEW.at OR last_seen = NEW.at);
    INSERT INTO crash_group_kinds (project, kind, signature, day, product, version, count)
    SELECT NEW.project, NEW.kind, NEW.signature, NEW.at / 86400000, NEW.product, NEW.version, 1
    WHERE NEW.delta > 0 AND NEW.kind <> ''
    ON CONFLICT (project, kind, signature, day, product, version) DO UPDATE SET
        count = count + 1;
    UPDATE crash_group_kinds SET count = count - 1
    WHERE NEW.delta < 0 AND project = NEW.project AND kind = NEW.kind
      AND signature = NEW.signature AND day = NEW.at / 86400000 AND product = NEW.product
      AND version = NEW.version;
    DELETE FROM crash_group_kinds
    WHERE NEW.delta < 0 AND project = NEW.project AND kind = NEW.kind
      AND signature = NEW.signature AND day = NEW.at / 86400000 AND product = NEW.product
      AND version = NEW.version AND count <= 0;
END;
