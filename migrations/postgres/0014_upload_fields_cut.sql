-- Upload fields are bounded as Crashpad bounds its annotations (issue 34, finding 9): what
-- the upload cut (values truncated, fields left out) is said here, and the worker turns it
-- into the report's `annotations-truncated` warning.
ALTER TABLE crashes ADD COLUMN annotations_cut TEXT;
