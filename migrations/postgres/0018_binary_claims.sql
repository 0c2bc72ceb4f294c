-- First upload wins, enforced by the database (issue 34, finding 3): a file claims its
-- identity (a build-id, a PDB's or `.sym` file's debug-id, a Windows image's code id and
-- name) in its format and role (`BinaryRow::role`) before it is stored, and the key below
-- lets one file hold a claim. A look-up before the insert alone let two different files
-- uploaded at the same moment both be stored. Files stored before this migration hold no
-- claim: the upload's look-up still finds them.
CREATE TABLE binary_claims (
    format TEXT NOT NULL,
    role TEXT NOT NULL,
    identity TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (format, role, identity)
);
