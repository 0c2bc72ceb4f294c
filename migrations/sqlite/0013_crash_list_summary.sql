-- Crash lists read summary columns only (issue 34, finding 2): the dashboard's crash list
-- showed each crash's analysis sentence by loading its whole report (tens of MB each).
-- The sentence now has its own column, written when the report is, and read by lists.
ALTER TABLE crashes ADD COLUMN analysis_summary TEXT;
UPDATE crashes SET analysis_summary = json_extract(report, '$.crash.analysis.summary')
    WHERE report IS NOT NULL AND json_valid(report);
