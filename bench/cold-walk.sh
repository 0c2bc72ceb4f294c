#!/usr/bin/env bash
# The cold one-shot walk a person meets first, side by side with eu-stack and gdb: each
# tool given one core and the crashed program, libc6-dbg installed, nothing cached.
#
# Usage: bench/cold-walk.sh [OUT_DIR]     (default: a new temporary directory)
# Environment:
#   POSTMORTEM_BIN  the binary (default: target/release/postmortem under CARGO_TARGET_DIR,
#                   built by this script)
#   POSTMORTEM_WALK_BIN  time this `postmortem-walk` (the same walk, a program of its
#                   own) instead of `postmortem walk`
#   RUNS            hyperfine runs per command (default 20, after 3 warm-up runs that
#                   fill the page cache: "cold" means no tables, not a cold disk)
#   POSTMORTEM_WALK_BASE  another build of postmortem-walk (the one before a change): timed
#                   and measured in the same run, as the tool `base`
#   PEAK_RUNS       runs whose peak memory is measured, per command (default 5: the
#                   median is printed)
# Needs: gcc, g++, gdb, eu-stack (elfutils), libc6-dbg, hyperfine, jq, /usr/bin/time, and
#   a core_pattern that writes `core` into the working directory (test.sh checks it).
#
# The cores are made here, by the programs in bench/cold/ compiled with gcc -g -O2:
#   blocked  20 threads blocked in read, poll, a condition variable, nanosleep, a mutex
#            and select while the main thread aborts;
#   deep     a 200-deep recursion that aborts at the bottom;
#   cxx      a C++ program that dies in std::terminate (an exception through noexcept).
# For each, the median wall time of (hyperfine):
#   postmortem walk CORE --symbols DIR           (DIR holds the program; libc's debug
#                                                 file comes from /usr/lib/debug)
#   eu-stack -i -m -s --core CORE --executable PROG
#   gdb -batch -nx -ex 'thread apply all bt' PROG CORE
# and the peak resident memory of each (/usr/bin/time -f %M, the median of PEAK_RUNS runs). Prints a
# Markdown table; the raw figures are in OUT/*.json. Before timing, each case's report is
# checked to be byte-identical to `postmortem walk --whole-tables`'s (the script stops
# if not).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-$(mktemp -d -t pm-coldbench-XXXXXX)}"
RUNS="${RUNS:-20}"
PEAK_RUNS="${PEAK_RUNS:-5}"
BASE="${POSTMORTEM_WALK_BASE:+$(realpath "${POSTMORTEM_WALK_BASE:-}")}"

NEEDS="gcc g++ gdb eu-stack hyperfine jq /usr/bin/time"
. bench/walk-command.sh

mkdir -p "$OUT"
OUT="$(realpath "$OUT")"
SRC="$(pwd)/bench/cold"

# case → compiler command
declare -A BUILD=(
    [blocked]="gcc -g -O2 -pthread -o prog $SRC/blocked.c"
    [deep]="gcc -g -O2 -o prog $SRC/deep.c"
    [cxx]="g++ -g -O2 -o prog $SRC/cxx.cpp"
)

for name in blocked deep cxx; do
    dir="$OUT/$name"
    rm -rf "$dir" && mkdir -p "$dir"
    (
        cd "$dir"
        ${BUILD[$name]}
        # the program dies by SIGABRT; its core is the case
        (ulimit -c unlimited; exec ./prog) 2>/dev/null || true
        core=$(ls core* 2>/dev/null | head -n1)
        [ -n "$core" ] || { echo "no core for $name: check core_pattern" >&2; exit 1; }
        [ "$core" = core ] || mv "$core" core
    )
done

printf '| case | core | tool | median wall | CPU (user+sys, mean) | peak memory |\n|---|---|---|---|---|---|\n'
for name in blocked deep cxx; do
    dir="$OUT/$name"
    size=$(awk -v b="$(stat -c %s "$dir/core")" 'BEGIN { printf "%.1f", b / 1048576 }')
    pm="$PM $dir/core --symbols $dir"
    # the one-shot walk builds tables only where it looks: its report must be the one
    # the whole tables (what the service builds) give
    $pm > "$OUT/$name.report.json"
    $pm --whole-tables > "$OUT/$name.whole.json"
    cmp -s "$OUT/$name.report.json" "$OUT/$name.whole.json" \
        || { echo "$name: the report differs with --whole-tables" >&2; exit 1; }
    eu="eu-stack -i -m -s --core $dir/core --executable $dir/prog"
    gd="gdb -batch -nx -ex 'thread apply all bt' $dir/prog $dir/core"
    base="$BASE $dir/core --symbols $dir"
    tools="postmortem eu-stack gdb"
    extra=()
    if [ -n "$BASE" ]; then
        tools="base $tools"
        extra=(-n base "$base")
    fi
    hyperfine -N --style none --warmup 3 --runs "$RUNS" -i \
        --export-json "$OUT/$name.json" \
        "${extra[@]}" -n postmortem "$pm" -n eu-stack "$eu" -n gdb "$gd" >/dev/null
    for tool in $tools; do
        case $tool in
            base) cmd=$base ;;
            postmortem) cmd=$pm ;;
            eu-stack) cmd=$eu ;;
            gdb) cmd=$gd ;;
        esac
        median=$(jq -r --arg t "$tool" \
            '.results[] | select(.command == $t) | .median * 1000 | floor' "$OUT/$name.json")
        cpu=$(jq -r --arg t "$tool" \
            '.results[] | select(.command == $t) | (.user + .system) * 1000 | floor' "$OUT/$name.json")
        peak=$(for _ in $(seq "$PEAK_RUNS"); do
            bash -c "/usr/bin/time -f %M $cmd" 2>&1 >/dev/null | tail -n1
        done | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
        printf '| %s | %s MB | %s | %s ms | %s ms | %.1f MB |\n' \
            "$name" "$size" "$tool" "$median" "$cpu" "$(awk -v k="$peak" 'BEGIN { print k / 1024 }')"
    done
done
echo "(raw figures: $OUT)" >&2
