-- Crash groups per project (issue 41; keep in step with ../sqlite/0026_project_groups.sql).
--
-- Crashes belong to a project (0023), but the group rows and rollups of 0006, 0021 and
-- 0035 and the decisions of 0017 were keyed by signature alone: two projects with one
-- signature shared one group, one count and one merge. Here every one of them is keyed
-- by (project, signature), project first, and every trigger follows a crash within its
-- project. Existing rows are rebuilt from `crashes` (each crash counts in its project).
--
-- A group's products and versions (0035's `crash_group_versions`) are now
-- `project_group_versions`: on a fresh database 0035 runs after this migration and
-- creates its own table again, which `Db::migrate` then drops (`store::db`), so every
-- database ends with the same schema whichever order the two were applied in.
--
-- Decisions: a pin (`group_pins`) is of one crash, so it takes its crash's project; a
-- merge (`group_merges`) is copied to each project where it acted (a crash of the merged
-- signature or of the group it went to), and from now on a merge or split acts in one
-- project only.

-- The old triggers, functions and tables (0035's only where it ran before this one).
DROP TABLE IF EXISTS crash_group_versions;
DROP TRIGGER crash_groups_follow ON crashes;
DROP TRIGGER crash_rollups_follow ON crashes;
DROP TABLE crash_group_days;
DROP FUNCTION IF EXISTS crash_group_versions_follow();
DROP FUNCTION crash_groups_follow();
DROP FUNCTION crash_groups_add(TEXT, BIGINT, TEXT, TEXT);
DROP FUNCTION crash_groups_remove(TEXT, BIGINT, TEXT, TEXT);
DROP FUNCTION crash_rollups_follow();
DROP FUNCTION crash_rollups_move(TEXT, BIGINT, TEXT, TEXT, TEXT, BOOLEAN, INT);
DROP TABLE crash_groups;
DROP TABLE crash_group_running;
DROP TABLE crash_group_kinds;

CREATE TABLE crash_groups (
    project    TEXT NOT NULL,
    signature  TEXT NOT NULL,
    count      BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL,
    PRIMARY KEY (project, signature)
);
-- One index per sort order within a project, and one across projects (a server-wide
-- caller naming no project); the signature, then the project, break ties.
CREATE INDEX crash_groups_by_count ON crash_groups (project, count, signature);
CREATE INDEX crash_groups_by_first ON crash_groups (project, first_seen, signature);
CREATE INDEX crash_groups_by_last ON crash_groups (project, last_seen, signature);
CREATE INDEX crash_groups_every_count ON crash_groups (count, signature, project);
CREATE INDEX crash_groups_every_first ON crash_groups (first_seen, signature, project);
CREATE INDEX crash_groups_every_last ON crash_groups (last_seen, signature, project);
CREATE INDEX crash_groups_every_signature ON crash_groups (signature, project);

CREATE TABLE crash_group_days (
    project    TEXT NOT NULL,
    signature  TEXT NOT NULL,
    day        BIGINT NOT NULL,
    product    TEXT NOT NULL,
    version    TEXT NOT NULL,
    count      BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL,
    PRIMARY KEY (project, signature, day, product, version)
);
CREATE INDEX crash_group_days_by_day ON crash_group_days (project, day, signature);
CREATE INDEX crash_group_days_by_product ON crash_group_days (project, product, day);

CREATE TABLE crash_group_running (
    project    TEXT NOT NULL,
    scope      TEXT NOT NULL,
    signature  TEXT NOT NULL,
    day        BIGINT NOT NULL,
    count      BIGINT NOT NULL,
    running    BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL,
    PRIMARY KEY (project, scope, signature, day)
);

CREATE TABLE crash_group_kinds (
    project   TEXT NOT NULL,
    kind      TEXT NOT NULL,
    signature TEXT NOT NULL,
    day       BIGINT NOT NULL,
    product   TEXT NOT NULL,
    version   TEXT NOT NULL,
    count     BIGINT NOT NULL,
    PRIMARY KEY (project, kind, signature, day, product, version)
);

CREATE TABLE project_group_versions (
    project   TEXT NOT NULL,
    signature TEXT NOT NULL,
    product   TEXT NOT NULL,
    version   TEXT NOT NULL,
    days      BIGINT NOT NULL,
    PRIMARY KEY (project, signature, product, version)
);

-- Rebuilt from the crashes, each in its project.
INSERT INTO crash_groups (project, signature, count, first_seen, last_seen)
SELECT project, signature, COUNT(*), MIN(received_at), MAX(received_at) FROM crashes
WHERE signature IS NOT NULL AND signature <> '' GROUP BY project, signature;

INSERT INTO crash_group_days (project, signature, day, product, version, count, first_seen,
                              last_seen)
SELECT project, signature, received_at / 86400000, COALESCE(product, ''),
       COALESCE(version, ''), COUNT(*), MIN(received_at), MAX(received_at) FROM crashes
WHERE signature IS NOT NULL AND signature <> ''
GROUP BY project, signature, received_at / 86400000, COALESCE(product, ''),
         COALESCE(version, '');

INSERT INTO crash_group_running (project, scope, signature, day, count, running, first_seen,
                                 last_seen)
SELECT project, '', signature, day, n,
       SUM(n) OVER (PARTITION BY project, signature ORDER BY day), f, l
FROM (SELECT project, signature, day, SUM(count) AS n, MIN(first_seen) AS f,
             MAX(last_seen) AS l
      FROM crash_group_days GROUP BY project, signature, day) d;
INSERT INTO crash_group_running (project, scope, signature, day, count, running, first_seen,
                                 last_seen)
SELECT project, 'p:' || product, signature, day, n,
       SUM(n) OVER (PARTITION BY project, product, signature ORDER BY day), f, l
FROM (SELECT project, product, signature, day, SUM(count) AS n, MIN(first_seen) AS f,
             MAX(last_seen) AS l
      FROM crash_group_days WHERE product <> '' GROUP BY project, product, signature, day) d;

INSERT INTO crash_group_kinds (project, kind, signature, day, product, version, count)
SELECT project, analysis_kind, signature, received_at / 86400000, COALESCE(product, ''),
       COALESCE(version, ''), COUNT(*)
FROM crashes WHERE analysis_kind IS NOT NULL AND analysis_kind <> ''
  AND signature IS NOT NULL AND signature <> ''
GROUP BY project, analysis_kind, signature, received_at / 86400000, COALESCE(product, ''),
         COALESCE(version, '');

INSERT INTO project_group_versions (project, signature, product, version, days)
SELECT project, signature, product, version, COUNT(*) FROM crash_group_days
GROUP BY project, signature, product, version;

-- Decisions: a pin takes its crash's project; a merge goes to each project it acted in.
ALTER TABLE group_pins ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
UPDATE group_pins p SET project = c.project FROM crashes c WHERE c.id = p.crash_id;
DROP INDEX group_pins_by_group;
CREATE INDEX group_pins_by_group ON group_pins (project, group_name, origin);

CREATE TABLE group_merges_0026 (
    project    TEXT NOT NULL,
    signature  TEXT NOT NULL,
    into_group TEXT NOT NULL,
    origin     TEXT,
    PRIMARY KEY (project, signature)
);
INSERT INTO group_merges_0026 (project, signature, into_group, origin)
SELECT DISTINCT c.project, m.signature, m.into_group, m.origin
FROM group_merges m JOIN crashes c
  ON c.signature = m.into_group OR c.computed_signature = m.signature;
DROP TABLE group_merges;
ALTER TABLE group_merges_0026 RENAME TO group_merges;
ALTER INDEX group_merges_0026_pkey RENAME TO group_merges_pkey;
CREATE INDEX group_merges_by_group ON group_merges (project, into_group, origin);

-- 0006's functions, within the crash's project.
CREATE FUNCTION crash_groups_add(proj TEXT, sig TEXT, at BIGINT, prod TEXT, ver TEXT)
RETURNS void AS $$
BEGIN
    INSERT INTO crash_groups (project, signature, count, first_seen, last_seen)
    VALUES (proj, sig, 1, at, at)
    ON CONFLICT (project, signature) DO UPDATE SET count = crash_groups.count + 1,
        first_seen = LEAST(crash_groups.first_seen, EXCLUDED.first_seen),
        last_seen = GREATEST(crash_groups.last_seen, EXCLUDED.last_seen);
    INSERT INTO crash_group_days (project, signature, day, product, version, count,
                                  first_seen, last_seen)
    VALUES (proj, sig, at / 86400000, COALESCE(prod, ''), COALESCE(ver, ''), 1, at, at)
    ON CONFLICT (project, signature, day, product, version) DO UPDATE SET
        count = crash_group_days.count + 1,
        first_seen = LEAST(crash_group_days.first_seen, EXCLUDED.first_seen),
        last_seen = GREATEST(crash_group_days.last_seen, EXCLUDED.last_seen);
END;
$$ LANGUAGE plpgsql;

-- A first or last seen recomputed from the crashes keeps its value when no crash of the
-- group is left there (0021: the rows of a statement moving several crashes at once).
CREATE FUNCTION crash_groups_remove(proj TEXT, sig TEXT, at BIGINT, prod TEXT, ver TEXT)
RETURNS void AS $$
DECLARE
    d BIGINT := at / 86400000;
BEGIN
    UPDATE crash_groups SET count = count - 1 WHERE project = proj AND signature = sig;
    DELETE FROM crash_groups WHERE project = proj AND signature = sig AND count <= 0;
    UPDATE crash_groups SET
        first_seen = COALESCE((SELECT MIN(received_at) FROM crashes
                               WHERE signature = sig AND project = proj), first_seen),
        last_seen = COALESCE((SELECT MAX(received_at) FROM crashes
                              WHERE signature = sig AND project = proj), last_seen)
    WHERE project = proj AND signature = sig AND (first_seen = at OR last_seen = at);
    UPDATE crash_group_days SET count = count - 1
    WHERE project = proj AND signature = sig AND day = d AND product = COALESCE(prod, '')
      AND version = COALESCE(ver, '');
    DELETE FROM crash_group_days
    WHERE project = proj AND signature = sig AND day = d AND product = COALESCE(prod, '')
      AND version = COALESCE(ver, '') AND count <= 0;
    UPDATE crash_group_days g SET
        first_seen = COALESCE((SELECT MIN(received_at) FROM crashes
            WHERE signature = sig AND project = proj
            AND received_at >= d * 86400000 AND received_at < (d + 1) * 86400000
            AND COALESCE(product, '') = g.product AND COALESCE(version, '') = g.version),
            g.first_seen),
        last_seen = COALESCE((SELECT MAX(received_at) FROM crashes
            WHERE signature = sig AND project = proj
            AND received_at >= d * 86400000 AND received_at < (d + 1) * 86400000
            AND COALESCE(product, '') = g.product AND COALESCE(version, '') = g.version),
            g.last_seen)
    WHERE g.project = proj AND g.signature = sig AND g.day = d
      AND g.product = COALESCE(prod, '') AND g.version = COALESCE(ver, '')
      AND (g.first_seen = at OR g.last_seen = at);
END;
$$ LANGUAGE plpgsql;

CREATE FUNCTION crash_groups_follow() RETURNS trigger AS $$
DECLARE
    old_sig TEXT;
    new_sig TEXT;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.signature <> '' THEN
        old_sig := OLD.signature;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.signature <> '' THEN
        new_sig := NEW.signature;
    END IF;
    IF TG_OP = 'UPDATE' AND old_sig IS NOT DISTINCT FROM new_sig
        AND OLD.project IS NOT DISTINCT FROM NEW.project
        AND OLD.product IS NOT DISTINCT FROM NEW.product
        AND OLD.version IS NOT DISTINCT FROM NEW.version THEN
        RETURN NULL;
    END IF;
    IF old_sig IS NOT NULL AND (new_sig IS NULL OR old_sig <= new_sig) THEN
        PERFORM crash_groups_remove(OLD.project, old_sig, OLD.received_at, OLD.product,
                                    OLD.version);
        old_sig := NULL;
    END IF;
    IF new_sig IS NOT NULL THEN
        PERFORM crash_groups_add(NEW.project, new_sig, NEW.received_at, NEW.product,
                                 NEW.version);
    END IF;
    IF old_sig IS NOT NULL THEN
        PERFORM crash_groups_remove(OLD.project, old_sig, OLD.received_at, OLD.product,
                                    OLD.version);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_groups_follow
AFTER INSERT OR DELETE OR UPDATE OF signature, product, version, project
ON crashes FOR EACH ROW EXECUTE FUNCTION crash_groups_follow();

-- 0021's rollups, within the crash's project: one crash entering (delta 1) or leaving
-- (delta -1) them, its running counts when `with_running` (its group changed), its kind
-- row when it has a kind.
CREATE FUNCTION crash_rollups_move(proj TEXT, sig TEXT, at BIGINT, prod TEXT, ver TEXT,
                                   knd TEXT, with_running BOOLEAN, delta INT)
RETURNS void AS $$
DECLARE
    d BIGINT := at / 86400000;
    s TEXT;
BEGIN
    IF with_running THEN
        FOREACH s IN ARRAY CASE WHEN COALESCE(prod, '') <> '' THEN ARRAY['', 'p:' || prod]
                                ELSE ARRAY[''] END LOOP
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
                          AND (s = '' OR c.product = prod)), g.first_seen),
                    last_seen = COALESCE((SELECT MAX(c.received_at) FROM crashes c
                        WHERE c.signature = sig AND c.project = proj
                          AND c.received_at >= d * 86400000
                          AND c.received_at < (d + 1) * 86400000
                          AND (s = '' OR c.product = prod)), g.last_seen)
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

CREATE FUNCTION crash_rollups_follow() RETURNS trigger AS $$
DECLARE
    moved BOOLEAN := TG_OP <> 'UPDATE';
BEGIN
    IF TG_OP = 'UPDATE' THEN
        moved := OLD.signature IS DISTINCT FROM NEW.signature
            OR OLD.project IS DISTINCT FROM NEW.project
            OR OLD.product IS DISTINCT FROM NEW.product
            OR OLD.version IS DISTINCT FROM NEW.version;
        IF NOT moved AND OLD.analysis_kind IS NOT DISTINCT FROM NEW.analysis_kind THEN
            RETURN NULL;
        END IF;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.signature <> '' THEN
        PERFORM crash_rollups_move(OLD.project, OLD.signature, OLD.received_at, OLD.product,
                                   OLD.version, OLD.analysis_kind, moved, -1);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.signature <> '' THEN
        PERFORM crash_rollups_move(NEW.project, NEW.signature, NEW.received_at, NEW.product,
                                   NEW.version, NEW.analysis_kind, moved, 1);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_rollups_follow
AFTER INSERT OR DELETE OR UPDATE OF signature, analysis_kind, product, version, project
ON crashes FOR EACH ROW EXECUTE FUNCTION crash_rollups_follow();

-- 0035's versions, within the project: one row per project, signature, product and
-- version, with the number of its day rows, kept by a trigger on `crash_group_days`.
CREATE FUNCTION project_group_versions_follow() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.project = NEW.project AND OLD.signature = NEW.signature
        AND OLD.product = NEW.product AND OLD.version = NEW.version THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE project_group_versions SET days = days - 1
        WHERE project = OLD.project AND signature = OLD.signature
          AND product = OLD.product AND version = OLD.version;
        DELETE FROM project_group_versions
        WHERE project = OLD.project AND signature = OLD.signature
          AND product = OLD.product AND version = OLD.version AND days <= 0;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO project_group_versions (project, signature, product, version, days)
        VALUES (NEW.project, NEW.signature, NEW.product, NEW.version, 1)
        ON CONFLICT (project, signature, product, version) DO UPDATE SET
            days = project_group_versions.days + 1;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER project_group_versions_follow
AFTER INSERT OR DELETE OR UPDATE OF project, signature, product, version
ON crash_group_days FOR EACH ROW EXECUTE FUNCTION project_group_versions_follow();
