-- Crash groups people corrected: merges and splits (issue 37; keep in step with
-- ../postgres/0017_group_decisions.sql).
--
-- `crashes.signature` stays the group a crash is in, so that the group rows of 0006, the
-- crash list's signature filter, search and reprocessing's filter all follow a person's
-- decision with no change; the signature the rules gave is now kept beside it in
-- `computed_signature`. The two are equal unless a decision below says otherwise.
--
-- Decisions, both applied whenever a crash's report is stored (first processing or
-- reprocessing, under any signature rules):
-- - `group_pins`: this crash is in this group, whatever its signature. A merge pins every
--   crash of the merged group, so a crash whose signature a rules change or new system
--   files change still lands in the merged group; a split pins the crashes it moved, so a
--   split stays split. `origin` is the group the crash was taken from (what undoing a
--   merge gives back).
-- - `group_merges`: a crash whose computed signature is `signature` and that has no pin
--   goes to `into_group` (crashes of a merged signature that arrive later).
ALTER TABLE crashes ADD COLUMN computed_signature TEXT;
UPDATE crashes SET computed_signature = signature;

CREATE TABLE group_pins (
    crash_id   TEXT PRIMARY KEY NOT NULL,
    group_name TEXT NOT NULL,
    origin     TEXT
);
CREATE INDEX group_pins_by_group ON group_pins (group_name, origin);

CREATE TABLE group_merges (
    signature  TEXT PRIMARY KEY NOT NULL,
    into_group TEXT NOT NULL,
    origin     TEXT
);
CREATE INDEX group_merges_by_group ON group_merges (into_group, origin);
