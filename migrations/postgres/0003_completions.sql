-- How many times a crash was finished `done` under a lease still held: evidence that the
-- lease guard lets no job complete twice (a requeue after a binary upload adds one).
ALTER TABLE crashes ADD COLUMN completions INTEGER NOT NULL DEFAULT 0;
