-- A version's running counts (issue 40; keep in step with ../sqlite/0037_version_running.sql).
--
-- The groups page of one version (`/?days=90&version=1.3`) summed the window's
-- `crash_group_days` rows of that version for every group: at a million crashes of 5,000
-- signatures over 90 days and ten versions, 367 ms on SQLite and 452 ms on PostgreSQL
-- (docs/performance.md), where a product's page, read from the running counts of the
-- product's scope (0021, 0026), took a few milliseconds. Here a third scope, 'v:' and the
-- version (every product of the group), kept by 0026's rollup function as the other two
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
      FROM crash_group_days WHERE version <> '' GROUP BY project, version, signature, day) d;

-- 0026's function with the version's scope beside the product's.
CREATE OR REPLACE FUNCTION crash_rollups_move(proj TEXT, sig TEXT, at BIGINT, prod TEXT, ver TEXT,
                                   knd TEXT, with_running BOOLEAN, delta INT)
RETURNS void AS $$
DECLARE
    d BIGINT := at / 86400000;
    s TEXT;
    scopes TEXT[];
BEGIN
    IF with_running THEN
        scopes := ARRAY[''];
        IF COALESCE(prod, '') <> '' THEN
            scopes := scopes || ('p:' || prod);
        END IF;
        IF COALESCE(ver, '') <> '' THEN
            scopes := scopes || ('v:' || ver);
        END IF;
        FOREACH s IN ARRAY scopes LOOP
            UPDATE crash_group_running SET running = running + delta
            WHERE project = proj AND scope = s AND signature = sig AND day > d;
            IF delta > 0 THEN
                INSERT INTO crash_group_running
                    (project, scope, signature, day, count, running, first_seen, last_seen)
                VALUES (proj, s, sig, d, 1, COALESCE((SELECT r.running
                    FROM crash_group_running r WHERE r.project = proj AND r.scope = s
                    AND r.signature = sig AND r.day < d ORDER BY r.day DESC LIMIT 1), 0) + 1,
                    at, at)
                ON CONFLICT (project, scope, signature, day) DO UPDATE SET
                    count = crash_group_running.count + 1,
                    running = crash_group_running.running + 1,
                    first_seen = LEAST(crash_group_running.first_seen, EXCLUDED.first_seen),
                    last_seen = GREATEST(crash_group_running.last_seen, EXCLUDED.last_seen);
            ELSE
                UPDATE crash_group_running SET count = count - 1, running = running - 1
                WHERE project = proj AND scope = s AND signature = sig AND day = d;
                DELETE FROM crash_group_running
                WHERE project = proj AND scope = s AND signature = sig AND day = d
                  AND count <= 0;
                UPDATE crash_group_running g SET
                    first_seen = COALESCE((SELECT MIN(c.received_at) FROM crashes c
                        WHERE c.signature = sig AND c.project = proj
                          AND c.received_at >= d * 86400000
                          AND c.received_at < (d + 1) * 86400000
                          AND (s = '' OR 'p:' || c.product = s OR 'v:' || c.version = s)), g.first_seen),
                    last_seen = COALESCE((SELECT MAX(c.received_at) FROM crashes c
                        WHERE c.signature = sig AND c.project = proj
                          AND c.received_at >= d * 86400000
                          AND c.received_at < (d + 1) * 86400000
                          AND (s = '' OR 'p:' || c.product = s OR 'v:' || c.version = s)), g.last_seen)
                WHERE g.project = proj AND g.scope = s AND g.signature = sig AND g.day = d
                  AND (g.first_seen = at OR g.last_seen = at);
            END IF;
        END LOOP;
    END IF;
    IF COALESCE(knd, '') <> '' THEN
        IF delta > 0 THEN
            INSERT INTO crash_group_kinds (project, kind, signature, day, product, version,
                                           count)
            VALUES (proj, knd, sig, d, COALESCE(prod, ''), COALESCE(ver, ''), 1)
            ON CONFLICT (project, kind, signature, day, product, version) DO UPDATE SET
                count = crash_group_kinds.count + 1;
        ELSE
            UPDATE crash_group_kinds SET count = count - 1
            WHERE project = proj AND kind = knd AND signature = sig AND day = d
              AND product = COALESCE(prod, '') AND version = COALESCE(ver, '');
            DELETE FROM crash_group_kinds
            WHERE project = proj AND kind = knd AND signature = sig AND day = d
              AND product = COALESCE(prod, '') AND version = COALESCE(ver, '')
              AND count <= 0;
        END IF;
    END IF;
END;
$$ LANGUAGE plpgsql;
