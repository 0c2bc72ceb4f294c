-- The products and versions of each crash group (issue 40; keep in step with
-- ../postgres/0035_group_versions.sql).
--
-- The groups page shows, per group of the page, its distinct products and versions. They
-- were read as DISTINCT over the group's `crash_group_days` rows (0006: one per day,
-- product and version): a hot group of a 90-day store has ~900 of them, a page of 50
-- groups ~45,000, as long as the groups query itself at a million crashes. Here one row
-- per signature, product and version, with the number of its day rows: a page reads at
-- most one row per version of its groups.
--
-- Kept by triggers on `crash_group_days` itself, whose rows exist exactly while a day,
-- product and version of the group has crashes (0006 inserts them and deletes them at
-- count 0; no statement changes their keys, but a key change is followed too).
CREATE TABLE crash_group_versions (
    signature TEXT NOT NULL,
    product   TEXT NOT NULL,
    version   TEXT NOT NULL,
    days      BIGINT NOT NULL,
    PRIMARY KEY (signature, product, version)
) WITHOUT ROWID;

INSERT INTO crash_group_versions (signature, product, version, days)
SELECT signature, product, version, COUNT(*) FROM crash_group_days
GROUP BY signature, product, version;

CREATE TRIGGER crash_group_versions_add AFTER INSERT ON crash_group_days
BEGIN
    INSERT INTO crash_group_versions (signature, product, version, days)
    VALUES (NEW.signature, NEW.product, NEW.version, 1)
    ON CONFLICT (signature, product, version) DO UPDATE SET days = days + 1;
END;

CREATE TRIGGER crash_group_versions_remove AFTER DELETE ON crash_group_days
BEGIN
    UPDATE crash_group_versions SET days = days - 1
    WHERE signature = OLD.signature AND product = OLD.product AND version = OLD.version;
    DELETE FROM crash_group_versions
    WHERE signature = OLD.signature AND product = OLD.product AND version = OLD.version
      AND days <= 0;
END;

CREATE TRIGGER crash_group_versions_move AFTER UPDATE OF signature, product, version
ON crash_group_days
WHEN OLD.signature IS NOT NEW.signature OR OLD.product IS NOT NEW.product
    OR OLD.version IS NOT NEW.version
BEGIN
    UPDATE crash_group_versions SET days = days - 1
    WHERE signature = OLD.signature AND product = OLD.product AND version = OLD.version;
    DELETE FROM crash_group_versions
    WHERE signature = OLD.signature AND product = OLD.product AND version = OLD.version
      AND days <= 0;
    INSERT INTO crash_group_versions (signature, product, version, days)
    VALUES (NEW.signature, NEW.product, NEW.version, 1)
    ON CONFLICT (signature, product, version) DO UPDATE SET days = days + 1;
END;
