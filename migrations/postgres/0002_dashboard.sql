-- Dashboard: crash groups by signature, product and version (keep in step with
-- ../sqlite/0002_dashboard.sql).

-- Product and version come from the upload's annotations (Crashpad `prod`/`ver`, or
-- `product`/`version`). They are columns so that the groups page can filter on them
-- through an index; a trigger fills them from the annotations of every new crash.
ALTER TABLE crashes ADD COLUMN product TEXT;
ALTER TABLE crashes ADD COLUMN version TEXT;

CREATE FUNCTION crashes_product_version() RETURNS trigger AS $$
BEGIN
    BEGIN
        NEW.product := COALESCE(NEW.annotations::jsonb ->> 'prod', NEW.annotations::jsonb ->> 'product');
        NEW.version := COALESCE(NEW.annotations::jsonb ->> 'ver', NEW.annotations::jsonb ->> 'version');
    EXCEPTION WHEN others THEN
        -- Annotations that are not a JSON object leave both unknown.
        NEW.product := NULL;
        NEW.version := NULL;
    END;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER crashes_product_version BEFORE INSERT ON crashes
FOR EACH ROW EXECUTE FUNCTION crashes_product_version();

UPDATE crashes SET
    product = COALESCE(annotations::jsonb ->> 'prod', annotations::jsonb ->> 'product'),
    version = COALESCE(annotations::jsonb ->> 'ver', annotations::jsonb ->> 'version')
WHERE annotations LIKE '{%';

-- Groups page: one index walk in signature order, stopping after a page of groups
-- (keyset on signature), with the time range read from the same index entries.
CREATE INDEX crashes_groups ON crashes (signature, received_at);
-- The same, within one product.
CREATE INDEX crashes_product_groups ON crashes (product, signature, received_at);
-- Crash list filtered by signature, newest first.
CREATE INDEX crashes_signature_newest ON crashes (signature, received_at DESC, id DESC);
