-- PostgreSQL's 0042 (../postgres/0042_groups_added_per_statement.sql) adds a batch's
-- first reports to their groups once per statement, from the statement's transition
-- tables. SQLite has no statement triggers with transition tables: its row triggers
-- (0026) keep the same rows, in the process's own writer, where no other store waits on
-- a group's lock. Nothing changes here; the file keeps the two lists of migrations in
-- step.
SELECT 1;
