-- A Windows image is matched to a crash by its file name and code id, and one image may
-- be shipped under several names (issue 34): every name its bytes were uploaded under,
-- beside the first (`binaries.file_name`), which the image keeps.
CREATE TABLE binary_names (
    sha256 TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (sha256, name)
);
INSERT INTO binary_names (sha256, name)
    SELECT sha256, file_name FROM binaries WHERE format = 'pe' AND file_name IS NOT NULL;
