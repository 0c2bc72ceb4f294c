-- Crash groups per project (issue 41; keep in step with ../postgres/0026_project_groups.sql).
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

-- The old triggers and tables (0035's only where it ran before this one).
DROP TRIGGER IF EXISTS crash_group_versions_add;
DROP TRIGGER IF EXISTS crash_group_versions_remove;
DROP TRIGGER IF EXISTS crash_group_versions_move;
DROP TABLE IF EXISTS crash_group_versions;
DROP TRIGGER crash_groups_insert;
DROP TRIGGER crash_groups_leave;
DROP TRIGGER crash_groups_join;
DROP TRIGGER crash_groups_delete;
DROP TRIGGER crash_rollups_insert;
DROP TRIGGER crash_rollups_leave;
DROP TRIGGER crash_rollups_join;
DROP TRIGGER crash_rollups_delete;
DROP TRIGGER crash_rollup_move;
DROP VIEW crash_rollup_moves;
DROP TABLE crash_groups;
DROP TABLE crash_group_days;
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
) WITHOUT ROWID;

CREATE TABLE crash_group_kinds (
    project   TEXT NOT NULL,
    kind      TEXT NOT NULL,
    signature TEXT NOT NULL,
    day       BIGINT NOT NULL,
    product   TEXT NOT NULL,
    version   TEXT NOT NULL,
    count     BIGINT NOT NULL,
    PRIMARY KEY (project, kind, signature, day, product, version)
) WITHOUT ROWID;

CREATE TABLE project_group_versions (
    project   TEXT NOT NULL,
    signature TEXT NOT NULL,
    product   TEXT NOT NULL,
    version   TEXT NOT NULL,
    days      BIGINT NOT NULL,
    PRIMARY KEY (project, signature, product, version)
) WITHOUT ROWID;

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
      FROM crash_group_days GROUP BY project, signature, day);
INSERT INTO crash_group_running (project, scope, signature, day, count, running, first_seen,
                                 last_seen)
SELECT project, 'p:' || product, signature, day, n,
       SUM(n) OVER (PARTITION BY project, product, signature ORDER BY day), f, l
FROM (SELECT project, product, signature, day, SUM(count) AS n, MIN(first_seen) AS f,
             MAX(last_seen) AS l
      FROM crash_group_days WHERE product <> '' GROUP BY project, product, signature, day);

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
UPDATE group_pins SET project = (SELECT c.project FROM crashes c WHERE c.id = group_pins.crash_id)
WHERE EXISTS (SELECT 1 FROM crashes c WHERE c.id = group_pins.crash_id);
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
CREATE INDEX group_merges_by_group ON group_merges (project, into_group, origin);

-- 0006's triggers, within the crash's project. A new crash that already has a signature
-- (imports): product and version from the annotations, as the crashes_product_version
-- trigger computes them (SQLite does not say which AFTER INSERT trigger runs first).
CREATE TRIGGER crash_groups_insert AFTER INSERT ON crashes
WHEN NEW.signature IS NOT NULL AND NEW.signature <> ''
BEGIN
    INSERT INTO crash_groups (project, signature, count, first_seen, last_seen)
    VALUES (NEW.project, NEW.signature, 1, NEW.received_at, NEW.received_at)
    ON CONFLICT (project, signature) DO UPDATE SET count = count + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
    INSERT INTO crash_group_days (project, signature, day, product, version, count,
                                  first_seen, last_seen)
    VALUES (NEW.project, NEW.signature, NEW.received_at / 86400000,
        COALESCE(CASE WHEN json_valid(NEW.annotations) THEN
            COALESCE(json_extract(NEW.annotations, '$.prod'), json_extract(NEW.annotations, '$.product')) END, ''),
        COALESCE(CASE WHEN json_valid(NEW.annotations) THEN
            COALESCE(json_extract(NEW.annotations, '$.ver'), json_extract(NEW.annotations, '$.version')) END, ''),
        1, NEW.received_at, NEW.received_at)
    ON CONFLICT (project, signature, day, product, version) DO UPDATE SET count = count + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
END;

-- One crash leaving its group (`crash_groups_leave` and `crash_groups_delete` insert
-- into this view; SQLite has no functions): the crash row already has its new values,
-- or is gone, so MIN/MAX over the group's crashes no longer see it.
CREATE VIEW crash_group_leaves AS
SELECT '' AS project, '' AS signature, 0 AS at, '' AS product, '' AS version WHERE 0;

CREATE TRIGGER crash_group_leave INSTEAD OF INSERT ON crash_group_leaves
BEGIN
    UPDATE crash_groups SET count = count - 1
    WHERE project = NEW.project AND signature = NEW.signature;
    DELETE FROM crash_groups
    WHERE project = NEW.project AND signature = NEW.signature AND count <= 0;
    UPDATE crash_groups SET
        first_seen = (SELECT MIN(received_at) FROM crashes
            WHERE signature = NEW.signature AND project = NEW.project),
        last_seen = (SELECT MAX(received_at) FROM crashes
            WHERE signature = NEW.signature AND project = NEW.project)
    WHERE project = NEW.project AND signature = NEW.signature
      AND (first_seen = NEW.at OR last_seen = NEW.at);
    UPDATE crash_group_days SET count = count - 1
    WHERE project = NEW.project AND signature = NEW.signature AND day = NEW.at / 86400000
      AND product = NEW.product AND version = NEW.version;
    DELETE FROM crash_group_days
    WHERE project = NEW.project AND signature = NEW.signature AND day = NEW.at / 86400000
      AND product = NEW.product AND version = NEW.version AND count <= 0;
    UPDATE crash_group_days SET
        first_seen = (SELECT MIN(received_at) FROM crashes
            WHERE signature = NEW.signature AND project = NEW.project
            AND received_at >= day * 86400000 AND received_at < (day + 1) * 86400000
            AND COALESCE(product, '') = crash_group_days.product
            AND COALESCE(version, '') = crash_group_days.version),
        last_seen = (SELECT MAX(received_at) FROM crashes
            WHERE signature = NEW.signature AND project = NEW.project
            AND received_at >= day * 86400000 AND received_at < (day + 1) * 86400000
            AND COALESCE(product, '') = crash_group_days.product
            AND COALESCE(version, '') = crash_group_days.version)
    WHERE project = NEW.project AND signature = NEW.signature AND day = NEW.at / 86400000
      AND product = NEW.product AND version = NEW.version
      AND (first_seen = NEW.at OR last_seen = NEW.at);
END;

CREATE TRIGGER crash_groups_leave AFTER UPDATE OF signature, project ON crashes
WHEN (OLD.signature IS NOT NEW.signature OR OLD.project IS NOT NEW.project)
    AND OLD.signature IS NOT NULL AND OLD.signature <> ''
BEGIN
    INSERT INTO crash_group_leaves (project, signature, at, product, version)
    VALUES (OLD.project, OLD.signature, OLD.received_at, COALESCE(OLD.product, ''),
        COALESCE(OLD.version, ''));
END;

-- ... and joins its new one (a first processing or a reprocessing that changed it).
CREATE TRIGGER crash_groups_join AFTER UPDATE OF signature, project ON crashes
WHEN (OLD.signature IS NOT NEW.signature OR OLD.project IS NOT NEW.project)
    AND NEW.signature IS NOT NULL AND NEW.signature <> ''
BEGIN
    INSERT INTO crash_groups (project, signature, count, first_seen, last_seen)
    VALUES (NEW.project, NEW.signature, 1, NEW.received_at, NEW.received_at)
    ON CONFLICT (project, signature) DO UPDATE SET count = count + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
    INSERT INTO crash_group_days (project, signature, day, product, version, count,
                                  first_seen, last_seen)
    VALUES (NEW.project, NEW.signature, NEW.received_at / 86400000, COALESCE(NEW.product, ''),
        COALESCE(NEW.version, ''), 1, NEW.received_at, NEW.received_at)
    ON CONFLICT (project, signature, day, product, version) DO UPDATE SET count = count + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
END;

-- A deleted crash leaves its group.
CREATE TRIGGER crash_groups_delete AFTER DELETE ON crashes
WHEN OLD.signature IS NOT NULL AND OLD.signature <> ''
BEGIN
    INSERT INTO crash_group_leaves (project, signature, at, product, version)
    VALUES (OLD.project, OLD.signature, OLD.received_at, COALESCE(OLD.product, ''),
        COALESCE(OLD.version, ''));
END;

-- 0021's rollups, within the crash's project: one crash entering (delta 1) or leaving
-- (delta -1) them, its running counts when `running` is 1 (its group changed), its kind
-- row when it has a kind.
CREATE VIEW crash_rollup_moves AS
SELECT '' AS project, '' AS signature, 0 AS at, '' AS product, '' AS version, '' AS kind,
       0 AS running, 0 AS delta
WHERE 0;

CREATE TRIGGER crash_rollup_move INSTEAD OF INSERT ON crash_rollup_moves
BEGIN
    UPDATE crash_group_running SET running = running + NEW.delta
    WHERE NEW.running = 1 AND project = NEW.project
      AND scope IN ('', 'p:' || NULLIF(NEW.product, ''))
      AND signature = NEW.signature AND day > NEW.at / 86400000;
    INSERT INTO crash_group_running (project, scope, signature, day, count, running,
                                     first_seen, last_seen)
    SELECT NEW.project, s.scope, NEW.signature, NEW.at / 86400000, 1,
        COALESCE((SELECT r.running FROM crash_group_running r WHERE r.project = NEW.project
            AND r.scope = s.scope AND r.signature = NEW.signature AND r.day < NEW.at / 86400000
            ORDER BY r.day DESC LIMIT 1), 0) + 1,
        NEW.at, NEW.at
    FROM (SELECT '' AS scope UNION ALL SELECT 'p:' || NEW.product WHERE NEW.product <> '') s
    WHERE NEW.running = 1 AND NEW.delta > 0
    ON CONFLICT (project, scope, signature, day) DO UPDATE SET count = count + 1,
        running = running + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
    UPDATE crash_group_running SET count = count - 1, running = running - 1
    WHERE NEW.running = 1 AND NEW.delta < 0 AND project = NEW.project
      AND scope IN ('', 'p:' || NULLIF(NEW.product, ''))
      AND signature = NEW.signature AND day = NEW.at / 86400000;
    DELETE FROM crash_group_running
    WHERE NEW.running = 1 AND NEW.delta < 0 AND project = NEW.project
      AND scope IN ('', 'p:' || NULLIF(NEW.product, ''))
      AND signature = NEW.signature AND day = NEW.at / 86400000 AND count <= 0;
    UPDATE crash_group_running SET
        first_seen = (SELECT MIN(c.received_at) FROM crashes c
            WHERE c.signature = NEW.signature AND c.project = NEW.project
              AND c.received_at >= day * 86400000 AND c.received_at < (day + 1) * 86400000
              AND (crash_group_running.scope = '' OR 'p:' || c.product = crash_group_running.scope)),
        last_seen = (SELECT MAX(c.received_at) FROM crashes c
            WHERE c.signature = NEW.signature AND c.project = NEW.project
              AND c.received_at >= day * 86400000 AND c.received_at < (day + 1) * 86400000
              AND (crash_group_running.scope = '' OR 'p:' || c.product = crash_group_running.scope))
    WHERE NEW.running = 1 AND NEW.delta < 0 AND project = NEW.project
      AND scope IN ('', 'p:' || NULLIF(NEW.product, ''))
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

CREATE TRIGGER crash_rollups_insert AFTER INSERT ON crashes
WHEN NEW.signature IS NOT NULL AND NEW.signature <> ''
BEGIN
    INSERT INTO crash_rollup_moves (project, signature, at, product, version, kind, running,
                                    delta)
    VALUES (NEW.project, NEW.signature, NEW.received_at,
        COALESCE(CASE WHEN json_valid(NEW.annotations) THEN
            COALESCE(json_extract(NEW.annotations, '$.prod'), json_extract(NEW.annotations, '$.product')) END, ''),
        COALESCE(CASE WHEN json_valid(NEW.annotations) THEN
            COALESCE(json_extract(NEW.annotations, '$.ver'), json_extract(NEW.annotations, '$.version')) END, ''),
        COALESCE(NEW.analysis_kind, ''), 1, 1);
END;

CREATE TRIGGER crash_rollups_leave AFTER UPDATE OF signature, analysis_kind, project ON crashes
WHEN (OLD.signature IS NOT NEW.signature OR OLD.analysis_kind IS NOT NEW.analysis_kind
      OR OLD.project IS NOT NEW.project)
    AND OLD.signature IS NOT NULL AND OLD.signature <> ''
BEGIN
    INSERT INTO crash_rollup_moves (project, signature, at, product, version, kind, running,
                                    delta)
    VALUES (OLD.project, OLD.signature, OLD.received_at, COALESCE(OLD.product, ''),
        COALESCE(OLD.version, ''), COALESCE(OLD.analysis_kind, ''),
        OLD.signature IS NOT NEW.signature OR OLD.project IS NOT NEW.project, -1);
END;

CREATE TRIGGER crash_rollups_join AFTER UPDATE OF signature, analysis_kind, project ON crashes
WHEN (OLD.signature IS NOT NEW.signature OR OLD.analysis_kind IS NOT NEW.analysis_kind
      OR OLD.project IS NOT NEW.project)
    AND NEW.signature IS NOT NULL AND NEW.signature <> ''
BEGIN
    INSERT INTO crash_rollup_moves (project, signature, at, product, version, kind, running,
                                    delta)
    VALUES (NEW.project, NEW.signature, NEW.received_at, COALESCE(NEW.product, ''),
        COALESCE(NEW.version, ''), COALESCE(NEW.analysis_kind, ''),
        OLD.signature IS NOT NEW.signature OR OLD.project IS NOT NEW.project, 1);
END;

CREATE TRIGGER crash_rollups_delete AFTER DELETE ON crashes
WHEN OLD.signature IS NOT NULL AND OLD.signature <> ''
BEGIN
    INSERT INTO crash_rollup_moves (project, signature, at, product, version, kind, running,
                                    delta)
    VALUES (OLD.project, OLD.signature, OLD.received_at, COALESCE(OLD.product, ''),
        COALESCE(OLD.version, ''), COALESCE(OLD.analysis_kind, ''), 1, -1);
END;

-- 0035's versions, within the project: one row per project, signature, product and
-- version, with the number of its day rows, kept by triggers on `crash_group_days`.
CREATE TRIGGER project_group_versions_add AFTER INSERT ON crash_group_days
BEGIN
    INSERT INTO project_group_versions (project, signature, product, version, days)
    VALUES (NEW.project, NEW.signature, NEW.product, NEW.version, 1)
    ON CONFLICT (project, signature, product, version) DO UPDATE SET days = days + 1;
END;

CREATE TRIGGER project_group_versions_remove AFTER DELETE ON crash_group_days
BEGIN
    UPDATE project_group_versions SET days = days - 1
    WHERE project = OLD.project AND signature = OLD.signature AND product = OLD.product
      AND version = OLD.version;
    DELETE FROM project_group_versions
    WHERE project = OLD.project AND signature = OLD.signature AND product = OLD.product
      AND version = OLD.version AND days <= 0;
END;

CREATE TRIGGER project_group_versions_move AFTER UPDATE OF project, signature, product, version
ON crash_group_days
WHEN OLD.project IS NOT NEW.project OR OLD.signature IS NOT NEW.signature
    OR OLD.product IS NOT NEW.product OR OLD.version IS NOT NEW.version
BEGIN
    UPDATE project_group_versions SET days = days - 1
    WHERE project = OLD.project AND signature = OLD.signature AND product = OLD.product
      AND version = OLD.version;
    DELETE FROM project_group_versions
    WHERE project = OLD.project AND signature = OLD.signature AND product = OLD.product
      AND version = OLD.version AND days <= 0;
    INSERT INTO project_group_versions (project, signature, product, version, days)
    VALUES (NEW.project, NEW.signature, NEW.product, NEW.version, 1)
    ON CONFLICT (project, signature, product, version) DO UPDATE SET days = days + 1;
END;
