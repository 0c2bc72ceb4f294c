-- The Breakpad debug id of ELF files stored before identify derived it (issue 39; keep
-- in step with ../sqlite/0040_elf_debug_ids.sql). A microdump names its modules
-- by debug id alone (its M lines), and the service finds an uploaded file for such a
-- module through binaries.debug_id; ELF rows stored before identify began writing it
-- kept NULL, so their files were never found for a microdump until uploaded again.
--
-- The id is Breakpad's for a Linux module (`FileID`, `MDGUID` printing): the build-id's
-- first 16 bytes (zero-padded when shorter) as a GUID whose first three fields (4, 2
-- and 2 bytes) are printed byte-swapped, upper-case, then the age 0. `build_id` is the
-- build-id's bytes in hex, two digits a byte, so each byte is a 2-character substring:
-- exactly what engine::ids::breakpad_debug_id_from_build_id computes, in SQL both
-- dialects read the same (substr, ||, upper).
UPDATE binaries
SET debug_id = upper(
    substr(build_id || '00000000000000000000000000000000', 7, 2)
    || substr(build_id || '00000000000000000000000000000000', 5, 2)
    || substr(build_id || '00000000000000000000000000000000', 3, 2)
    || substr(build_id || '00000000000000000000000000000000', 1, 2)
    || substr(build_id || '00000000000000000000000000000000', 11, 2)
    || substr(build_id || '00000000000000000000000000000000', 9, 2)
    || substr(build_id || '00000000000000000000000000000000', 15, 2)
    || substr(build_id || '00000000000000000000000000000000', 13, 2)
    || substr(build_id || '00000000000000000000000000000000', 17, 16)
    || '0')
WHERE format = 'elf' AND debug_id IS NULL AND build_id <> '';
