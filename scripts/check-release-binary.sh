#!/usr/bin/env bash
# The release binary keeps its debug information out of what ships (issue 36: with
# `debug = 1` kept whole in it, `postmortem` weighed 177 MB). The release profile splits
# it into BINARY.dwp (Cargo.toml: split-debuginfo = "packed"), and the image ships the
# binary after scripts/split-debuginfo.sh: code and symbol table only. This checks, on the
# release build the README's first command made (test.sh), that the .dwp is there, that
# both sizes stay within their measured bounds (docs/performance.md: 95.8 MB and 29.6 MB
# when they were set), and that the shipped copy keeps its function names and the link
# to its debug file.
set -euo pipefail
bin="${1:-${CARGO_TARGET_DIR:-target}/release/postmortem}"
# bounds raised 2026-11-30 (session 32): the build had grown to 120.6 MB built and
# 41 MB shipped with the code, not the debug information (the .dwp is 101 MB beside it);
# they still catch debug information kept in the binary (177 MB)
max_built_mb=130    # the binary cargo builds: line tables and skeleton units in it
max_shipped_mb=45   # after split-debuginfo.sh: code and symbol table
fail() { echo "check-release-binary: $*" >&2; exit 1; }

[ -f "$bin" ] || fail "no release binary at $bin (build it with cargo build --release)"
[ -s "$bin.dwp" ] || fail "no $bin.dwp beside the binary: the release profile no longer splits its debug information off"
size_mb() { echo $(( $(stat -c %s "$1") / 1000000 )); }
built="$(size_mb "$bin")"
[ "$built" -le "$max_built_mb" ] || fail "$bin is $built MB, over $max_built_mb MB"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$bin" "$work/postmortem"
"$(dirname "$0")/split-debuginfo.sh" "$work/postmortem" >/dev/null
shipped="$(size_mb "$work/postmortem")"
[ "$shipped" -le "$max_shipped_mb" ] || fail "the shipped binary is $shipped MB, over $max_shipped_mb MB"
readelf -SW "$work/postmortem" | grep -q ' \.symtab ' ||
    fail "the shipped binary has no symbol table: backtraces would have no function names"
# (.debug_gdb_scripts is not DWARF: an allocated section naming rustc's gdb pretty-printers)
readelf -SW "$work/postmortem" | grep -Eq ' \.debug_(info|line|abbrev|str|ranges|rnglists|loc|loclists|addr|aranges) ' &&
    fail "the shipped binary still carries DWARF sections"
readelf --string-dump=.gnu_debuglink "$work/postmortem" | grep -q 'postmortem\.debug' ||
    fail "the shipped binary does not link to postmortem.debug"
echo "release binary: $built MB built (debug information in $(size_mb "$bin.dwp") MB of .dwp), $shipped MB shipped"
