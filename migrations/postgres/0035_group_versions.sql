-- The products and versions of each crash group (issue 40; keep in step with
-- ../sqlite/0035_group_versions.sql).
--
-- The groups page shows, per group of the page, its distinct products and versions. They
-- were read as DISTINCT over the group's `crash_group_days` rows (0006: one per day,
-- product and version): a hot group of a 90-day store has ~900 of them, a page of 50
-- groups ~45,000, as long as the groups query itself at a million crashes. Here one row
-- per signature, product and version, with the number of its day rows: a page reads at
-- most one row per version of its groups.
--
-- Kept by a trigger on `crash_group_days` itself, whose rows exist exactly while a day,
-- product and version of the group has crashes (0006 inserts them and deletes them at
-- count 0; no statement changes their keys, but a key change is followed too).
CREATE TABLE crash_group_versions (
    signature TEXT NOT NULL,
    product   TEXT NOT NULL,
    version   TEXT NOT NULL,
    days      BIGINT NOT NULL,
    PRIMARY KEY (signature, product, version)
);

INSERT INTO crash_group_versions (signature, product, version, days)
SELECT signature, product, version, COUNT(*) FROM crash_group_days
GROUP BY signature, product, version;

CREATE FUNCTION crash_group_versions_follow() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.signature = NEW.signature AND OLD.product = NEW.product
        AND OLD.version = NEW.version THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE crash_group_versions SET days = days - 1
        WHERE signature = OLD.signature AND product = OLD.product AND version = OLD.version;
        DELETE FROM crash_group_versions
        WHERE signature = OLD.signature AND product = OLD.product AND version = OLD.version
          AND days <= 0;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO crash_group_versions (signature, product, version, days)
        VALUES (NEW.signature, NEW.product, NEW.version, 1)
        ON CONFLICT (signature, product, version) DO UPDATE SET
            days = crash_group_versions.days + 1;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crash_group_versions_follow
AFTER INSERT OR DELETE OR UPDATE OF signature, product, version
ON crash_group_days FOR EACH ROW EXECUTE FUNCTION crash_group_versions_follow();
