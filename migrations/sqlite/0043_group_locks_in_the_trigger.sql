-- PostgreSQL's 0043 (../postgres/0043_group_locks_in_the_trigger.sql) takes a batch's
-- groups' advisory locks in a statement trigger, right before its first reports enter
-- their groups. SQLite has one writer at a time and no advisory locks: nothing changes
-- here; the file keeps the two lists of migrations in step.
SELECT 1;
