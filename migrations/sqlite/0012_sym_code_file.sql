-- Windows .sym files found by the image they describe (issue 20): a module that a
-- minidump names without a CodeView record (wine's dbghelp writes none) has no debug id
-- to find its .sym file by, only its file name and code id. dump_syms writes both in the
-- file's `INFO CODE_ID CODE_ID NAME` record: the code id goes in `code_id`, the name here.
ALTER TABLE binaries ADD COLUMN code_file TEXT;
