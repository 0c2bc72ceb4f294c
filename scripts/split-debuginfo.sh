#!/usr/bin/env bash
# Splits the debug information off release binaries, as docker/Dockerfile ships them:
# for each BINARY, BINARY.debug gets its DWARF (what the release profile keeps in the
# binary: the line tables and the skeleton units that point into BINARY.dwp, rustc's
# packed split DWARF; Cargo.toml) and BINARY keeps its code and symbol table, so a panic's
# backtrace still names every function, with a .gnu_debuglink to BINARY.debug. gdb given
# the binary with BINARY.debug and BINARY.dwp beside it (or under /usr/lib/debug) shows
# every frame with its inlined calls, file and line. Needs binutils' objcopy.
#   scripts/split-debuginfo.sh target/release/postmortem target/release/postmortem-walk
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
for bin in "$@"; do
    dir="$(dirname "$bin")"
    name="$(basename "$bin")"
    # --add-gnu-debuglink records the debug file's name and CRC, read from the current
    # directory: run beside the binary
    (
        cd "$dir"
        objcopy --only-keep-debug "$name" "$name.debug"
        objcopy --strip-debug --add-gnu-debuglink="$name.debug" "$name"
    )
    echo "$bin: $(stat -c %s "$bin") bytes; $bin.debug: $(stat -c %s "$bin.debug") bytes"
done
