-- Dashboard: crash groups by signature, product and version (keep in step with
-- ../postgres/0002_dashboard.sql).

-- Product and version come from the upload's annotations (Crashpad `prod`/`ver`, or
-- `product`/`version`). They are columns so that the groups page can filter on them
-- through an index; a trigger fills them from the annotations of every new crash.
ALTER TABLE crashes ADD COLUMN product TEXT;
ALTER TABLE crashes ADD COLUMN version TEXT;

UPDATE crashes SET
    product = COALESCE(json_extract(annotations, '$.prod'), json_extract(annotations, '$.product')),
    version = COALESCE(json_extract(annotations, '$.ver'), json_extract(annotations, '$.version'))
WHERE json_valid(annotations);

CREATE TRIGGER crashes_product_version AFTER INSERT ON crashes
WHEN json_valid(NEW.annotations)
BEGIN
    UPDATE crashes SET
        product = COALESCE(json_extract(NEW.annotations, '$.prod'), json_extract(NEW.annotations, '$.product')),
        version = COALESCE(json_extract(NEW.annotations, '$.ver'), json_extract(NEW.annotations, '$.version'))
    WHERE id = NEW.id;
END;

-- Groups page: one index walk in signature order, stopping after a page of groups
-- (keyset on signature), with the time range read from the same index entries.
CREATE INDEX crashes_groups ON crashes (signature, received_at);
-- The same, within one product.
CREATE INDEX crashes_product_groups ON crashes (product, signature, received_at);
-- Crash list filtered by signature, newest first.
CREATE INDEX crashes_signature_newest ON crashes (signature, received_at DESC, id DESC);
