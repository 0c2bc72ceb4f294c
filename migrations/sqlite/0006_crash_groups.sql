-- Crash groups as maintained aggregate rows (keep in step with
-- ../postgres/0006_crash_groups.sql).
--
-- The groups page sorts by count, first seen, last seen or signature. Aggregating the
-- crashes table for each page would read every crash; instead triggers keep one row per
-- signature (`crash_groups`, for all time) and one per signature, UTC day, product and
-- version (`crash_group_days`, for the time-range, product and version filters and the
-- per-day chart). A crash belongs to a group while its signature is set and not empty;
-- the rows follow every insert, delete and signature change (reprocessing), so they are
-- never rebuilt. Unknown product or version is '' (primary-key columns are NOT NULL).

CREATE TABLE crash_groups (
    signature  TEXT PRIMARY KEY NOT NULL,
    count      BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL
);
-- One index per sort order; the signature breaks ties and is the keyset's second half.
CREATE INDEX crash_groups_by_count ON crash_groups (count, signature);
CREATE INDEX crash_groups_by_first ON crash_groups (first_seen, signature);
CREATE INDEX crash_groups_by_last ON crash_groups (last_seen, signature);

CREATE TABLE crash_group_days (
    signature  TEXT NOT NULL,
    day        BIGINT NOT NULL,
    product    TEXT NOT NULL,
    version    TEXT NOT NULL,
    count      BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL,
    PRIMARY KEY (signature, day, product, version)
);
CREATE INDEX crash_group_days_by_day ON crash_group_days (day, signature);
CREATE INDEX crash_group_days_by_product ON crash_group_days (product, day);

INSERT INTO crash_groups (signature, count, first_seen, last_seen)
SELECT signature, COUNT(*), MIN(received_at), MAX(received_at) FROM crashes
WHERE signature IS NOT NULL AND signature <> '' GROUP BY signature;

INSERT INTO crash_group_days (signature, day, product, version, count, first_seen, last_seen)
SELECT signature, received_at / 86400000, COALESCE(product, ''), COALESCE(version, ''),
       COUNT(*), MIN(received_at), MAX(received_at) FROM crashes
WHERE signature IS NOT NULL AND signature <> ''
GROUP BY signature, received_at / 86400000, COALESCE(product, ''), COALESCE(version, '');

-- A new crash that already has a signature (imports; the service inserts pending crashes
-- without one). Product and version are computed from the annotations exactly as the
-- crashes_product_version trigger does, since SQLite does not say which of the two
-- AFTER INSERT triggers runs first.
CREATE TRIGGER crash_groups_insert AFTER INSERT ON crashes
WHEN NEW.signature IS NOT NULL AND NEW.signature <> ''
BEGIN
    INSERT INTO crash_groups (signature, count, first_seen, last_seen)
    VALUES (NEW.signature, 1, NEW.received_at, NEW.received_at)
    ON CONFLICT (signature) DO UPDATE SET count = count + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
    INSERT INTO crash_group_days (signature, day, product, version, count, first_seen, last_seen)
    VALUES (NEW.signature, NEW.received_at / 86400000,
        COALESCE(CASE WHEN json_valid(NEW.annotations) THEN
            COALESCE(json_extract(NEW.annotations, '$.prod'), json_extract(NEW.annotations, '$.product')) END, ''),
        COALESCE(CASE WHEN json_valid(NEW.annotations) THEN
            COALESCE(json_extract(NEW.annotations, '$.ver'), json_extract(NEW.annotations, '$.version')) END, ''),
        1, NEW.received_at, NEW.received_at)
    ON CONFLICT (signature, day, product, version) DO UPDATE SET count = count + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
END;

-- A crash leaves its old group (the crash row already has its new values, or is gone,
-- so MIN/MAX over the group's index range no longer see it).
CREATE TRIGGER crash_groups_leave AFTER UPDATE OF signature ON crashes
WHEN OLD.signature IS NOT NEW.signature AND OLD.signature IS NOT NULL AND OLD.signature <> ''
BEGIN
    UPDATE crash_groups SET count = count - 1 WHERE signature = OLD.signature;
    DELETE FROM crash_groups WHERE signature = OLD.signature AND count <= 0;
    UPDATE crash_groups SET
        first_seen = (SELECT MIN(received_at) FROM crashes WHERE signature = OLD.signature),
        last_seen = (SELECT MAX(received_at) FROM crashes WHERE signature = OLD.signature)
    WHERE signature = OLD.signature
      AND (first_seen = OLD.received_at OR last_seen = OLD.received_at);
    UPDATE crash_group_days SET count = count - 1
    WHERE signature = OLD.signature AND day = OLD.received_at / 86400000
      AND product = COALESCE(OLD.product, '') AND version = COALESCE(OLD.version, '');
    DELETE FROM crash_group_days
    WHERE signature = OLD.signature AND day = OLD.received_at / 86400000
      AND product = COALESCE(OLD.product, '') AND version = COALESCE(OLD.version, '')
      AND count <= 0;
    UPDATE crash_group_days SET
        first_seen = (SELECT MIN(received_at) FROM crashes WHERE signature = OLD.signature
            AND received_at >= day * 86400000 AND received_at < (day + 1) * 86400000
            AND COALESCE(product, '') = crash_group_days.product
            AND COALESCE(version, '') = crash_group_days.version),
        last_seen = (SELECT MAX(received_at) FROM crashes WHERE signature = OLD.signature
            AND received_at >= day * 86400000 AND received_at < (day + 1) * 86400000
            AND COALESCE(product, '') = crash_group_days.product
            AND COALESCE(version, '') = crash_group_days.version)
    WHERE signature = OLD.signature AND day = OLD.received_at / 86400000
      AND product = COALESCE(OLD.product, '') AND version = COALESCE(OLD.version, '')
      AND (first_seen = OLD.received_at OR last_seen = OLD.received_at);
END;

-- ... and joins its new one (a first processing or a reprocessing that changed it).
CREATE TRIGGER crash_groups_join AFTER UPDATE OF signature ON crashes
WHEN OLD.signature IS NOT NEW.signature AND NEW.signature IS NOT NULL AND NEW.signature <> ''
BEGIN
    INSERT INTO crash_groups (signature, count, first_seen, last_seen)
    VALUES (NEW.signature, 1, NEW.received_at, NEW.received_at)
    ON CONFLICT (signature) DO UPDATE SET count = count + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
    INSERT INTO crash_group_days (signature, day, product, version, count, first_seen, last_seen)
    VALUES (NEW.signature, NEW.received_at / 86400000, COALESCE(NEW.product, ''),
        COALESCE(NEW.version, ''), 1, NEW.received_at, NEW.received_at)
    ON CONFLICT (signature, day, product, version) DO UPDATE SET count = count + 1,
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen);
END;

-- A deleted crash leaves its group.
CREATE TRIGGER crash_groups_delete AFTER DELETE ON crashes
WHEN OLD.signature IS NOT NULL AND OLD.signature <> ''
BEGIN
    UPDATE crash_groups SET count = count - 1 WHERE signature = OLD.signature;
    DELETE FROM crash_groups WHERE signature = OLD.signature AND count <= 0;
    UPDATE crash_groups SET
        first_seen = (SELECT MIN(received_at) FROM crashes WHERE signature = OLD.signature),
        last_seen = (SELECT MAX(received_at) FROM crashes WHERE signature = OLD.signature)
    WHERE signature = OLD.signature
      AND (first_seen = OLD.received_at OR last_seen = OLD.received_at);
    UPDATE crash_group_days SET count = count - 1
    WHERE signature = OLD.signature AND day = OLD.received_at / 86400000
      AND product = COALESCE(OLD.product, '') AND version = COALESCE(OLD.version, '');
    DELETE FROM crash_group_days
    WHERE signature = OLD.signature AND day = OLD.received_at / 86400000
      AND product = COALESCE(OLD.product, '') AND version = COALESCE(OLD.version, '')
      AND count <= 0;
    UPDATE crash_group_days SET
        first_seen = (SELECT MIN(received_at) FROM crashes WHERE signature = OLD.signature
            AND received_at >= day * 86400000 AND received_at < (day + 1) * 86400000
            AND COALESCE(product, '') = crash_group_days.product
            AND COALESCE(version, '') = crash_group_days.version),
        last_seen = (SELECT MAX(received_at) FROM crashes WHERE signature = OLD.signature
            AND received_at >= day * 86400000 AND received_at < (day + 1) * 86400000
            AND COALESCE(product, '') = crash_group_days.product
            AND COALESCE(version, '') = crash_group_days.version)
    WHERE signature = OLD.signature AND day = OLD.received_at / 86400000
      AND product = COALESCE(OLD.product, '') AND version = COALESCE(OLD.version, '')
      AND (first_seen = OLD.received_at OR last_seen = OLD.received_at);
END;
