-- Crash list filters that stay index-backed on many crashes: product and version (columns
-- of crashes since 0002) and the modules and function names of each crash's report.
-- Names are stored once in search_terms; crash_terms links them to crashes. A "function
-- contains" filter scans the distinct names (not the crashes) and follows the links.
-- Written by the worker when a report is stored (a reprocess replaces a crash's links).
CREATE INDEX crashes_product_newest ON crashes (product, received_at DESC, id DESC);
CREATE INDEX crashes_version_newest ON crashes (version, received_at DESC, id DESC);

CREATE TABLE search_terms (
    id   BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    term TEXT NOT NULL,
    UNIQUE (kind, term)
);

CREATE TABLE crash_terms (
    term_id  BIGINT NOT NULL,
    crash_id TEXT NOT NULL,
    PRIMARY KEY (term_id, crash_id)
);
CREATE INDEX crash_terms_crash ON crash_terms (crash_id);
