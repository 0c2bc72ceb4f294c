-- Windows images (issue 20): a minidump names a Windows module by its file name and code
-- id (TimeDateStamp + SizeOfImage, upper-case hex), not by a build-id; uploaded .exe and
-- .dll files are found by it.
ALTER TABLE binaries ADD COLUMN code_id TEXT;
CREATE INDEX binaries_code_id ON binaries (code_id);
