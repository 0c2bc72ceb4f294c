-- Breakpad .sym and Mach-O uploads (keep the sqlite and postgres files in step).

-- The Breakpad debug-id (GUID + age, upper-case) of .sym files (their MODULE line) and
-- Mach-O files (LC_UUID + age 0): minidumps of Windows and macOS processes name their
-- modules by it alone. `build_id` is '' for a file that has none (a Windows .sym).
ALTER TABLE binaries ADD COLUMN debug_id TEXT;
-- elf, macho or breakpad.
ALTER TABLE binaries ADD COLUMN format TEXT NOT NULL DEFAULT 'elf';
CREATE INDEX binaries_debug_id ON binaries (debug_id);

-- The missing module's debug-id, so that a .sym upload requeues the crashes that needed
-- it. `build_id` stays the key: the module's build-id, or its debug-id when it has none.
ALTER TABLE missing_modules ADD COLUMN debug_id TEXT;
CREATE INDEX missing_modules_debug_id ON missing_modules (debug_id);

-- Which crashes had a module's tables from a .sym file alone: a later upload of the
-- module's binary (whose tables win) or of a newer .sym requeues them. Keyed like
-- missing_modules.
CREATE TABLE breakpad_modules (
    build_id    TEXT NOT NULL,
    crash_id    TEXT NOT NULL,
    debug_id    TEXT,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (build_id, crash_id)
);
CREATE INDEX breakpad_modules_crash ON breakpad_modules (crash_id);
CREATE INDEX breakpad_modules_debug_id ON breakpad_modules (debug_id);
