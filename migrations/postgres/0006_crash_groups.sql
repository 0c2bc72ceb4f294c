-- Crash groups as maintained aggregate rows (keep in step with
-- ../sqlite/0006_crash_groups.sql).
--
-- The groups page sorts by count, first seen, last seen or signature. Aggregating the
-- crashes table for each page would read every crash; instead a trigger keeps one row per
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

-- Adds one crash to its group and day row.
CREATE FUNCTION crash_groups_add(sig TEXT, at BIGINT, prod TEXT, ver TEXT) RETURNS void AS $$
BEGIN
    INSERT INTO crash_groups (signature, count, first_seen, last_seen)
    VALUES (sig, 1, at, at)
    ON CONFLICT (signature) DO UPDATE SET count = crash_groups.count + 1,
        first_seen = LEAST(crash_groups.first_seen, EXCLUDED.first_seen),
        last_seen = GREATEST(crash_groups.last_seen, EXCLUDED.last_seen);
    INSERT INTO crash_group_days (signature, day, product, version, count, first_seen, last_seen)
    VALUES (sig, at / 86400000, COALESCE(prod, ''), COALESCE(ver, ''), 1, at, at)
    ON CONFLICT (signature, day, product, version) DO UPDATE SET count = crash_group_days.count + 1,
        first_seen = LEAST(crash_group_days.first_seen, EXCLUDED.first_seen),
        last_seen = GREATEST(crash_group_days.last_seen, EXCLUDED.last_seen);
END;
$$ LANGUAGE plpgsql;

-- Takes one crash out of its group and day row (called after the crash row changed or
-- went, so MIN/MAX over the group's index range no longer see it).
CREATE FUNCTION crash_groups_remove(sig TEXT, at BIGINT, prod TEXT, ver TEXT) RETURNS void AS $$
DECLARE
    d BIGINT := at / 86400000;
BEGIN
    UPDATE crash_groups SET count = count - 1 WHERE signature = sig;
    DELETE FROM crash_groups WHERE signature = sig AND count <= 0;
    UPDATE crash_groups SET
        first_seen = (SELECT MIN(received_at) FROM crashes WHERE signature = sig),
        last_seen = (SELECT MAX(received_at) FROM crashes WHERE signature = sig)
    WHERE signature = sig AND (first_seen = at OR last_seen = at);
    UPDATE crash_group_days SET count = count - 1
    WHERE signature = sig AND day = d AND product = COALESCE(prod, '') AND version = COALESCE(ver, '');
    DELETE FROM crash_group_days
    WHERE signature = sig AND day = d AND product = COALESCE(prod, '') AND version = COALESCE(ver, '')
      AND count <= 0;
    UPDATE crash_group_days g SET
        first_seen = (SELECT MIN(received_at) FROM crashes WHERE signature = sig
            AND received_at >= d * 86400000 AND received_at < (d + 1) * 86400000
            AND COALESCE(product, '') = g.product AND COALESCE(version, '') = g.version),
        last_seen = (SELECT MAX(received_at) FROM crashes WHERE signature = sig
            AND received_at >= d * 86400000 AND received_at < (d + 1) * 86400000
            AND COALESCE(product, '') = g.product AND COALESCE(version, '') = g.version)
    WHERE g.signature = sig AND g.day = d AND g.product = COALESCE(prod, '')
      AND g.version = COALESCE(ver, '') AND (g.first_seen = at OR g.last_seen = at);
END;
$$ LANGUAGE plpgsql;

-- Keeps the rows in step with crashes. A crash moving between two groups touches them in
-- signature order, so two crashes swapping groups lock the rows in the same order.
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
        AND OLD.product IS NOT DISTINCT FROM NEW.product
        AND OLD.version IS NOT DISTINCT FROM NEW.version THEN
        RETURN NULL;
    END IF;
    IF old_sig IS NOT NULL AND (new_sig IS NULL OR old_sig <= new_sig) THEN
        PERFORM crash_groups_remove(old_sig, OLD.received_at, OLD.product, OLD.version);
        old_sig := NULL;
    END IF;
    IF new_sig IS NOT NULL THEN
        PERFORM crash_groups_add(new_sig, NEW.received_at, NEW.product, NEW.version);
    END IF;
    IF old_sig IS NOT NULL THEN
        PERFORM crash_groups_remove(old_sig, OLD.received_at, OLD.product, OLD.version);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_groups_follow AFTER INSERT OR DELETE OR UPDATE OF signature, product, version
ON crashes FOR EACH ROW EXECUTE FUNCTION crash_groups_follow();
