#!/usr/bin/env bash
# The report writer on a deep thread: a minidump whose crashed thread is 10,000 calls deep
# (the walk stops at its 8,192-frame limit), walked from Breakpad .sym files into each
# output format, beside minidump-stackwalk --json on the same dump and store.
#
# Usage: bench/deep-report.sh [OUT_DIR]      (default: a new temporary directory)
# Environment:
#   POSTMORTEM_WALK_BIN  the walk-only binary (default: target/release/postmortem-walk
#                        under CARGO_TARGET_DIR, built by this script)
#   RUNS                 hyperfine runs per command (default 7: medians of 7)
#   POSTMORTEM_WALK_BASE another build of postmortem-walk (the one before a change): its
#                        three formats are timed in the same hyperfine run, as base_*
# Needs: gcc, hyperfine, dump_syms and minidump-stackwalk (cargo install --locked
#   minidump-stackwalk dump_syms), /usr/bin/time, a plain core_pattern (the crash is
#   recorded by testsupport's `make_dumps record`, which also writes the kernel's core).
#
# Prints per command the median wall time (hyperfine -N) and the peak RSS
# (/usr/bin/time -v, one run each), then the ratios the performance page quotes.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-$(mktemp -d -t pm-deep-XXXXXX)}"
RUNS="${RUNS:-7}"
TARGET="${CARGO_TARGET_DIR:-target}"
for tool in gcc hyperfine dump_syms minidump-stackwalk jq; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
if [ -z "${POSTMORTEM_WALK_BIN:-}" ]; then
    cargo build --release -p postmortem-cli >&2
    POSTMORTEM_WALK_BIN="$TARGET/release/postmortem-walk"
fi
WALK="$(realpath "$POSTMORTEM_WALK_BIN")"
mkdir -p "$OUT"
OUT="$(realpath "$OUT")"

# The program: 10,000 nested calls of a function that is no tail call, a null write at
# the bottom.
mkdir -p "$OUT/prog"
cat >"$OUT/prog/deep.c" <<'EOF'
#include <stdio.h>
volatile int sink;
__attribute__((noinline)) int recurse(int *p, int depth) {
    if (depth == 0) {
        *p = 1;
        return sink;
    }
    int r = recurse(p, depth - 1);
    return r + depth + sink;
}
int main(int argc, char **argv) {
    (void)argv;
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", recurse(p, 10000));
    return 0;
}
EOF
gcc -g -O2 -Wl,--build-id -o "$OUT/prog/deep" "$OUT/prog/deep.c"
if [ ! -f "$OUT/deep.dmp" ]; then
    cargo run -q -p postmortem-testsupport --example make_dumps -- record "$OUT/prog/deep" \
        >"$OUT/record.txt"
    cp "$(sed -n 's/^minidump //p' "$OUT/record.txt")" "$OUT/deep.dmp"
fi
DUMP="$OUT/deep.dmp"

# The Breakpad store: the program's and libc's .sym at their layout paths.
STORE="$OUT/store"
rm -rf "$STORE"
for f in "$OUT/prog/deep" /lib/x86_64-linux-gnu/libc.so.6; do
    dump_syms "$f" >"$OUT/one.sym" 2>/dev/null
    read -r _ _ _ id name < <(head -n 1 "$OUT/one.sym")
    mkdir -p "$STORE/$name/$id"
    mv "$OUT/one.sym" "$STORE/$name/$id/$name.sym"
done

common=("$DUMP" --symbols-path "$STORE" --no-system-debug --no-dump-paths)
declare -A CMD=(
    [text]="$WALK ${common[*]} --format text"
    [json]="$WALK ${common[*]} --format json"
    [stackwalk_json]="$WALK ${common[*]} --json"
    [minidump_stackwalk]="minidump-stackwalk --json --symbols-path $STORE $DUMP"
)
ORDER=(text json stackwalk_json minidump_stackwalk)
if [ -n "${POSTMORTEM_WALK_BASE:-}" ]; then
    BASE="$(realpath "$POSTMORTEM_WALK_BASE")"
    CMD[base_text]="$BASE ${common[*]} --format text"
    CMD[base_json]="$BASE ${common[*]} --format json"
    CMD[base_stackwalk_json]="$BASE ${common[*]} --json"
    ORDER+=(base_text base_json base_stackwalk_json)
fi

echo "postmortem-walk: $("$WALK" --version 2>/dev/null || echo "$WALK")"
echo "minidump-stackwalk: $(minidump-stackwalk --version)"
echo "frames of the crashed thread: $($WALK "${common[@]}" --json | jq '.crashing_thread.frame_count')"
echo "machine: $(nproc) cores, $(uname -sr)"
args=()
for n in "${ORDER[@]}"; do args+=(-n "$n" "${CMD[$n]}"); done
hyperfine -N --style none --warmup 1 --runs "$RUNS" --output null \
    --export-json "$OUT/hyperfine.json" "${args[@]}" >/dev/null
printf '%-20s %10s %10s %10s\n' command median_ms peak_MB out_MB
declare -A MS
for n in "${ORDER[@]}"; do
    ms="$(jq --arg n "$n" '.results[] | select(.command == $n) | .median * 1000' "$OUT/hyperfine.json")"
    MS[$n]="$ms"
    # shellcheck disable=SC2086
    /usr/bin/time -v ${CMD[$n]} >"$OUT/$n.out" 2>"$OUT/$n.time"
    kb="$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$OUT/$n.time")"
    printf '%-20s %10.1f %10.1f %10.1f\n' "$n" "$ms" "$(echo "$kb / 1024" | bc -l)" \
        "$(echo "$(stat -c %s "$OUT/$n.out") / 1048576" | bc -l)"
done
ratio() { echo "$1 / $2" | bc -l; }
printf 'json / text: %.2f (target <= 2)\n' "$(ratio "${MS[json]}" "${MS[text]}")"
printf 'stackwalk_json / json: %.2f (target <= 1.5)\n' "$(ratio "${MS[stackwalk_json]}" "${MS[json]}")"
printf 'minidump_stackwalk / stackwalk_json: %.1f (target >= 15)\n' \
    "$(ratio "${MS[minidump_stackwalk]}" "${MS[stackwalk_json]}")"
