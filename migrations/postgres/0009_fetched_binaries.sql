-- Files fetched from a remote symbol source (issue 19): stored in the blob store and
-- indexed like an upload, so the next crash of the build needs no network, with the
-- source they came from (NULL for an upload) for the report's `files[].source`.
ALTER TABLE binaries ADD COLUMN source TEXT;
