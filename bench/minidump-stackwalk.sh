#!/usr/bin/env bash
# Side by side with minidump-stackwalk (rust-minidump) on the same minidumps and the same
# Breakpad .sym files: wall time per dump, and frames equal to gdb's on the core of the
# same crash.
#
# Usage: bench/minidump-stackwalk.sh [OUT_DIR]      (default: a new temporary directory)
# Environment:
#   POSTMORTEM_BIN  the binary (default: target/release/postmortem under CARGO_TARGET_DIR,
#                   built by this script)
#   POSTMORTEM_WALK_BIN  the walk-only binary (default: built by this script as shipped,
#                   linked statically, in CARGO_TARGET_DIR)
#   RUNS            hyperfine runs per command (default 20), in ROUNDS
#                   rounds (default 5; at least 2 runs a round) of the three in turn
#   WARM_RUNS       repetitions of `postmortem bench walk` (default 200)
#   ARCH            x86_64 (default) or aarch64: the aarch64 cases of the suite instead
#                   (test `minidump_stackwalk_side_by_side_aarch64`: programs crashed under
#                   QEMU, minidumps converted from QEMU's cores with the thread stacks as
#                   a client writes them (not all of the core's memory), the store
#                   OUT/store-aarch64
#                   with the program's, ld.so's and the cross libc's .sym, counts against
#                   gdb-multiarch in OUT/frames-aarch64.tsv; needs what test.sh installs
#                   for the aarch64 comparison). Use a separate OUT_DIR per ARCH: every
#                   OUT_DIR/*/minidump.dmp is timed.
# Needs: gcc, g++, gdb, libc6-dbg, hyperfine, jq, a plain core_pattern, and
#   cargo install --locked minidump-stackwalk dump_syms
#
# Steps:
# 1. The ignored test `minidump_stackwalk_side_by_side` (server/tests/minidump_gdb) compiles
#    each crash program of the minidump suite (C -O0, C -O2 -fomit-frame-pointer, the
#    threads program, the C++ virtual call), records each crash as a minidump and a kernel
#    core (testsupport/src/record.rs), writes the program's .sym (dump_syms) and libc.so.6's
#    (dump_syms of libc with the functions and lines of its libc6-dbg debug file) into one
#    Breakpad symbol store OUT/store/NAME/ID/NAME.sym, walks every minidump with both tools
#    on that store and counts per case the frames equal to gdb's on the core
#    (OUT/frames.tsv). The programs' work directories are removed afterwards, so the paths
#    in the dumps no longer resolve.
# 2. Times, per dump, with hyperfine (median):
#    - minidump-stackwalk --json --symbols-path STORE DUMP   (parses the .sym files each run)
#    - postmortem-walk DUMP --symbols-path STORE --no-system-debug --no-dump-paths
#      (reads the same .sym files each run, found by the same layout paths, and builds the
#      records the walk needs: "cold")
#    - postmortem walk DUMP … (the same walk from the all-in-one binary that also runs the
#      service: "cold_all"; it costs more to start)
#    - postmortem-walk DUMP --symbols CASE/bin (x86_64: the program itself, libc at the
#      path the dump records and its libc6-dbg debug file, no .sym: "local")
#    - the same with --table-cache DIR after a first walk filled DIR ("cached": whole
#      tables read from disk, as a batch of dumps of the same builds meets them), and that
#      first walk itself, DIR emptied before each run ("first": it builds whole tables and
#      stores them)
#    and `postmortem bench walk` with the same inputs: the median walk + symbolize time with
#    the tables built once ("warm", as in the service). minidump-stackwalk has no warm mode:
#    its per-dump time is the comparison point for both.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-$(mktemp -d -t pm-mdbench-XXXXXX)}"
RUNS="${RUNS:-20}"
ROUNDS="${ROUNDS:-5}"
WARM_RUNS="${WARM_RUNS:-200}"
TARGET="${CARGO_TARGET_DIR:-target}"

for tool in minidump-stackwalk dump_syms hyperfine jq gdb gcc g++; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done

if [ -z "${POSTMORTEM_BIN:-}" ]; then
    cargo build --release -p postmortem >&2
    POSTMORTEM_BIN="$TARGET/release/postmortem"
fi
POSTMORTEM_BIN="$(realpath "$POSTMORTEM_BIN")"
export POSTMORTEM_BIN
if [ -z "${POSTMORTEM_WALK_BIN:-}" ]; then
    # as docker/Dockerfile builds it; kept apart, as a later `cargo build` relinks it
    cargo rustc --release -p postmortem-cli --bin postmortem-walk -- \
        -C target-feature=+crt-static >&2
    mkdir -p "$TARGET/bench"
    cp "$TARGET/release/postmortem-walk" "$TARGET/bench/postmortem-walk"
    POSTMORTEM_WALK_BIN="$TARGET/bench/postmortem-walk"
fi
POSTMORTEM_WALK_BIN="$(realpath "$POSTMORTEM_WALK_BIN")"

mkdir -p "$OUT"
case "${ARCH:-x86_64}" in
    x86_64) TEST=minidump_stackwalk_side_by_side STORE_NAME=store FRAMES=frames.tsv ;;
    aarch64)
        TEST=aarch64::minidump_stackwalk_side_by_side_aarch64
        STORE_NAME=store-aarch64 FRAMES=frames-aarch64.tsv
        ;;
    *) echo "ARCH must be x86_64 or aarch64" >&2; exit 2 ;;
esac
rm -rf "${OUT:?}/$STORE_NAME"
MDBENCH_OUT="$(realpath "$OUT")" cargo test -p postmortem --test suite -- \
    --ignored --exact "minidump_gdb::$TEST" >&2
OUT="$(realpath "$OUT")"
STORE="$OUT/$STORE_NAME"

echo "postmortem: $("$POSTMORTEM_BIN" --version 2>/dev/null || echo "$POSTMORTEM_BIN")"
echo "postmortem-walk: $("$POSTMORTEM_WALK_BIN" --version 2>/dev/null || echo "$POSTMORTEM_WALK_BIN")"
echo "minidump-stackwalk: $(minidump-stackwalk --version)"
echo "dump_syms: $(dump_syms --version)"
echo "machine: $(nproc) cores, $(uname -sr)"
echo

printf '%-18s %12s %12s %12s %12s %12s %12s %12s %8s %8s\n' \
    case stackwalk_ms cold_ms cold_all_ms local_ms cached_ms first_ms warm_ms cold_x warm_x
median() { # the median of the "cold" etc. run times of every round, in ms
    jq -s --arg n "$1" '[.[].results[] | select(.command == $n) | .times[]] | sort
        | (if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end) * 1000' \
        "$2"/hyperfine-*.json
}
for dir in "$OUT"/*/; do
    dump="$dir/minidump.dmp"
    [ -f "$dump" ] || continue
    case_name="$(basename "$dir")"
    rm -f "$dir"/hyperfine-*.json
    # -N: no shell between hyperfine and the tools (its start-up would count for both).
    # Rounds of the three commands in turn: this machine's speed drifts over seconds,
    # and one long run per command would compare different moments.
    # "local": the binaries themselves instead of .sym files, as on the machine that
    # crashed: the program under --symbols, libc at the path the dump records with its
    # libc6-dbg debug file (x86_64 only: the aarch64 cases' libraries are not here)
    local_cmd=()
    tables="$dir/table-cache"
    rm -rf "$tables" "$tables-first"
    if [ -d "$dir/bin" ]; then
        local_cmd=(-n local "$POSTMORTEM_WALK_BIN $dump --symbols $dir/bin"
            -n cached "$POSTMORTEM_WALK_BIN $dump --symbols $dir/bin --table-cache $tables")
    fi
    for round in $(seq "$ROUNDS"); do
        hyperfine -N --style none --warmup 2 --runs "$((RUNS / ROUNDS))" \
            --export-json "$dir/hyperfine-$round.json" \
            -n stackwalk "minidump-stackwalk --json --symbols-path $STORE $dump" \
            -n cold "$POSTMORTEM_WALK_BIN $dump --symbols-path $STORE --no-system-debug --no-dump-paths" \
            -n cold_all "$POSTMORTEM_BIN walk $dump --symbols-path $STORE --no-system-debug --no-dump-paths" \
            "${local_cmd[@]}" \
            >/dev/null
    done
    sw=$(median stackwalk "$dir")
    cold=$(median cold "$dir")
    cold_all=$(median cold_all "$dir")
    local_ms=$( ((${#local_cmd[@]})) && median local "$dir" || echo 0)
    cached=$( ((${#local_cmd[@]})) && median cached "$dir" || echo 0)
    first=0
    if ((${#local_cmd[@]})); then
        hyperfine -N --style none --runs "$RUNS" --prepare "rm -rf $tables-first" \
            --export-json "$dir/first.json" \
            -n first "$POSTMORTEM_WALK_BIN $dump --symbols $dir/bin --table-cache $tables-first" \
            >/dev/null
        first=$(jq '[.results[0].times[]] | sort | .[length / 2 | floor] * 1000' "$dir/first.json")
    fi
    "$POSTMORTEM_BIN" bench walk "$dump" --symbols-path "$STORE" --no-system-debug --no-dump-paths \
        --runs "$WARM_RUNS" >"$dir/bench-walk.txt"
    warm=$(sed -n 's/.*warm tables: median \([0-9.]*\) ms.*/\1/p' "$dir/bench-walk.txt")
    awk -v c="$case_name" -v sw="$sw" -v cold="$cold" -v all="$cold_all" -v loc="$local_ms" \
        -v cached="$cached" -v first="$first" -v warm="$warm" 'BEGIN {
        printf "%-18s %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.3f %7.1fx %7.0fx\n", c, sw, cold, all, loc, cached, first, warm, sw / cold, sw / warm
    }'
done
echo
echo "frames compared with gdb on the core (physical frames, position by position):"
column -t -s $'\t' "$OUT/$FRAMES"
echo
echo "files kept in $OUT"
