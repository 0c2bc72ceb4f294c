-- Upload fields are stored once (issue 34, finding 9): in the crash's `annotations`
-- column, no longer again in its report. A report stored without them says so here, and is
-- served with them added back (`worker::store::served_report`); reports stored before
-- this migration hold them already and are served as they are.
ALTER TABLE crashes ADD COLUMN report_fields_apart INTEGER NOT NULL DEFAULT 0;
