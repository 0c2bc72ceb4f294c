-- Crash lists read summary columns only (issue 34, finding 2): the dashboard's crash list
-- showed each crash's analysis sentence by loading its whole report (tens of MB each).
-- The sentence now has its own column, written when the report is, and read by lists.
-- Existing reports are read one at a time; one that is not JSON keeps no sentence.
ALTER TABLE crashes ADD COLUMN analysis_summary TEXT;
DO $$
DECLARE r RECORD;
BEGIN
    FOR r IN SELECT id FROM crashes WHERE report IS NOT NULL LOOP
        BEGIN
            UPDATE crashes SET analysis_summary = report::jsonb #>> '{crash,analysis,summary}'
                WHERE id = r.id;
        EXCEPTION WHEN others THEN NULL;
        END;
    END LOOP;
END $$;
