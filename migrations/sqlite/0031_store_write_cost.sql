-- What storing a crash writes (issue 40; keep in step with ../postgres/0031_store_write_cost.sql).
--
-- `crashes_signature (signature)` is the first column of `crashes_groups (signature,
-- received_at)` and of `crashes_signature_newest`: every lookup by signature is served
-- as well by either, and the index was one more entry to write whenever a crash gains
-- or changes its signature (every processed crash).
DROP INDEX crashes_signature;

-- The reprocess selection of a signature (`store::reprocess`: done or failed, dump kept,
-- not yet queued by the run) counted from an index alone, instead of reading each of
-- the signature's crashes; a crash enters it once, when it is finished. On SQLite the
-- columns read after a crash's report are behind its overflow pages: at 100,000 crashes
-- the hot signature's selection took 108 ms, about ten times that at a million.
CREATE INDEX crashes_reprocessable ON crashes (signature, reprocess_run, status, dump_gone)
WHERE status IN ('done', 'failed') AND dump_gone IS NULL;

-- A new crash's product and version: the insert now writes them itself (the same
-- expressions, `store::crashes::insert`), and this trigger (0002) rewrites the row only
-- for an insert that did not (an UPDATE of the row just written, and of its product
-- and version indexes, for every upload).
DROP TRIGGER crashes_product_version;
CREATE TRIGGER crashes_product_version AFTER INSERT ON crashes
WHEN json_valid(NEW.annotations)
    AND (NEW.product IS NOT COALESCE(json_extract(NEW.annotations, '$.prod'),
                                     json_extract(NEW.annotations, '$.product'))
         OR NEW.version IS NOT COALESCE(json_extract(NEW.annotations, '$.ver'),
                                        json_extract(NEW.annotations, '$.version')))
BEGIN
    UPDATE crashes SET
        product = COALESCE(json_extract(NEW.annotations, '$.prod'), json_extract(NEW.annotations, '$.product')),
        version = COALESCE(json_extract(NEW.annotations, '$.ver'), json_extract(NEW.annotations, '$.version'))
    WHERE id = NEW.id;
END;
