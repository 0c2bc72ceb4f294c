-- The queue's counts by status (issue 40; keep in step with
-- ../postgres/0036_status_counts_by_row.sql).
--
-- PostgreSQL's 0036 follows status changes with a row trigger that fires only when a
-- crash's status changes, in place of 0034's statement trigger, whose transition tables
-- captured every updated row. SQLite's 0034 triggers were already of that kind (`AFTER
-- UPDATE OF status ... WHEN OLD.status IS NOT NEW.status`): nothing changes here; the
-- number is kept so that both dialects list the same migrations.
SELECT 1;
