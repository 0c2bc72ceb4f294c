#!/usr/bin/env bash
# Windows x64 minidumps: cold and warm walk times of postmortem beside minidump-stackwalk,
# on a dump made here (the suite's crash program server/tests/crashers/windows/basic.c,
# cross-compiled with mingw-w64 at -O2, run under wine; its unhandled-exception filter
# writes the minidump with dbghelp).
#
# Usage: bench/windows.sh [OUT_DIR]      (default: a new temporary directory)
# Environment:
#   POSTMORTEM_BIN  the binary (default: target/release/postmortem under CARGO_TARGET_DIR,
#                   built by this script)
#   RUNS            hyperfine runs per command (default 30)
#   WARM_RUNS       repetitions of `postmortem bench walk` (default 200)
# Needs what test.sh installs (wine, wine64, gcc-mingw-w64-x86-64, minidump-stackwalk),
# hyperfine and jq.
#
# OUT_DIR/symbols holds the program and the wine DLLs the dump lists (copied from the
# private prefix OUT_DIR/prefix); each command walks the dump with them:
# - postmortem walk DUMP --symbols OUT/symbols --format json   ("cold": the files are
#   read and their tables built on every run, as a one-shot walk does)
# - the same with --table-cache OUT/tables, filled by one walk before ("cached")
# - postmortem bench walk DUMP --symbols OUT/symbols ("warm": tables built once, as the
#   service keeps them; the median walk + symbolize time)
# - minidump-stackwalk --json DUMP: wine's writer records no CodeView record, so there is
#   no debug id to look a .sym file up by; it walks with the dump alone (and scans).
# Then the same program built by clang and lld with a PDB (-g -gcodeview -O2, crashed
# again: OUT/pdb.dmp), walked cold and warm with the image and its PDB (OUT/pdb-symbols)
# and cold with dump_syms' .sym of them instead (OUT/sym-symbols); needs clang, lld and
# dump_syms.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-$(mktemp -d -t pm-winbench-XXXXXX)}"
RUNS="${RUNS:-30}"
WARM_RUNS="${WARM_RUNS:-200}"
TARGET="${CARGO_TARGET_DIR:-target}"
for tool in wine wineserver x86_64-w64-mingw32-gcc minidump-stackwalk hyperfine jq; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
if [ -z "${POSTMORTEM_BIN:-}" ]; then
    cargo build --release -p postmortem >&2
    POSTMORTEM_BIN="$TARGET/release/postmortem"
fi

mkdir -p "$OUT/symbols"
export WINEPREFIX="$OUT/prefix" WINEDEBUG=-all
trap 'wineserver -k >/dev/null 2>&1 || true' EXIT
crashers=server/tests/crashers/windows
cp "$crashers/basic.c" "$crashers/dump_on_crash.c" "$crashers/dump_on_crash.h" "$OUT/"
(cd "$OUT" && x86_64-w64-mingw32-gcc -g -O2 basic.c dump_on_crash.c -o basic.exe -ldbghelp)
(cd "$OUT" && { wine basic.exe crash.dmp >/dev/null 2>&1 || true; })
test -s "$OUT/crash.dmp" || { echo "no minidump written" >&2; exit 1; }
cp "$OUT/basic.exe" "$OUT/symbols/"
# the DLLs the dump lists, from the prefix's system32
"$POSTMORTEM_BIN" walk "$OUT/crash.dmp" --format json 2>/dev/null \
    | jq -r '.modules[].path // empty' | grep -i '^c:\\windows\\system32\\' \
    | sed 's/.*\\//' | while read -r dll; do
        cp "$WINEPREFIX/drive_c/windows/system32/$dll" "$OUT/symbols/" 2>/dev/null || true
    done
ls "$OUT/symbols"

# "cached": the same walk with --table-cache, after one walk stored the modules' whole
# tables (as a batch of dumps of the same builds meets them)
rm -rf "$OUT/tables"
"$POSTMORTEM_BIN" walk "$OUT/crash.dmp" --symbols "$OUT/symbols" --no-system-debug \
    --table-cache "$OUT/tables" >/dev/null
for how in "" "--table-cache $OUT/tables"; do
    # shellcheck disable=SC2086 # $how is two words or none
    "$POSTMORTEM_BIN" walk "$OUT/crash.dmp" --symbols "$OUT/symbols" --no-system-debug \
        --format json $how > "$OUT/report${how:+-cached}.json"
done
cmp "$OUT/report.json" "$OUT/report-cached.json" \
    || { echo "the cached walk's report differs from the cold walk's" >&2; exit 1; }
hyperfine -N --style basic --warmup 3 --runs "$RUNS" --export-json "$OUT/hyperfine.json" \
    -n minidump-stackwalk "minidump-stackwalk --json $OUT/crash.dmp" \
    -n cold "$POSTMORTEM_BIN walk $OUT/crash.dmp --symbols $OUT/symbols --no-system-debug --format json" \
    -n cached "$POSTMORTEM_BIN walk $OUT/crash.dmp --symbols $OUT/symbols --no-system-debug --format json --table-cache $OUT/tables"
"$POSTMORTEM_BIN" bench walk "$OUT/crash.dmp" --symbols "$OUT/symbols" --no-system-debug \
    --runs "$WARM_RUNS"
echo "frames: minidump-stackwalk $(minidump-stackwalk --json "$OUT/crash.dmp" 2>/dev/null \
    | jq '.crashing_thread.frames | length'), postmortem $("$POSTMORTEM_BIN" walk \
    "$OUT/crash.dmp" --symbols "$OUT/symbols" --no-system-debug --format json 2>/dev/null \
    | jq '[.threads[] | select(.crashed) | .frames[]] | length')"

# the clang/lld build with a PDB
libgcc_dir="$(dirname "$(x86_64-w64-mingw32-gcc -print-libgcc-file-name)")"
(cd "$OUT" && clang --target=x86_64-w64-mingw32 -fuse-ld=lld -g -gcodeview -O2 basic.c \
    dump_on_crash.c -Wl,--pdb=basic_pdb.pdb -L "$libgcc_dir" -o basic_pdb.exe -ldbghelp)
(cd "$OUT" && { wine basic_pdb.exe pdb.dmp >/dev/null 2>&1 || true; })
test -s "$OUT/pdb.dmp" || { echo "no minidump written by the PDB build" >&2; exit 1; }
mkdir -p "$OUT/pdb-symbols" "$OUT/sym-symbols"
cp "$OUT"/symbols/*.dll "$OUT/pdb-symbols/"
cp "$OUT"/symbols/*.dll "$OUT/sym-symbols/"
cp "$OUT/basic_pdb.exe" "$OUT/basic_pdb.pdb" "$OUT/pdb-symbols/"
dump_syms --inlines "$OUT/basic_pdb.exe" > "$OUT/sym-symbols/basic_pdb.sym"
hyperfine -N --style basic --warmup 3 --runs "$RUNS" --export-json "$OUT/hyperfine-pdb.json" \
    -n "cold, image + PDB" \
    "$POSTMORTEM_BIN walk $OUT/pdb.dmp --symbols $OUT/pdb-symbols --no-system-debug --format json" \
    -n "cold, .sym" \
    "$POSTMORTEM_BIN walk $OUT/pdb.dmp --symbols $OUT/sym-symbols --no-system-debug --format json"
"$POSTMORTEM_BIN" bench walk "$OUT/pdb.dmp" --symbols "$OUT/pdb-symbols" --no-system-debug \
    --runs "$WARM_RUNS"
