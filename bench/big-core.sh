#!/usr/bin/env bash
# A 4 GB core walked beside eu-stack and gdb (issue 40): the walk maps the core and reads
# its notes, the threads' stacks and some code, so its time and memory must not grow with
# the core's size.
#
# Usage: bench/big-core.sh [OUT_DIR]     (default: a new temporary directory)
# Environment:
#   POSTMORTEM_BIN / POSTMORTEM_WALK_BIN  as bench/cold-walk.sh (bench/walk-command.sh)
#   POSTMORTEM_WALK_BASE  another build of postmortem-walk, timed and measured in the same
#            run as the tool `base` (as bench/cold-walk.sh)
#   BIG_MB   the heap the program writes before it aborts, MiB (default 4096: a 4.1 GB core)
#   RUNS     hyperfine runs per command (default 5, after 1 warm-up run that puts the core
#            in the page cache: 17 GB of free memory on the 2-core machine holds it)
#   PEAK_RUNS  runs whose peak memory is measured, per command (default 3: the median)
#   KEEP_CORE=1  leave the core in OUT_DIR (by default it is deleted at the end)
# Needs: gcc, gdb, eu-stack, hyperfine, jq, /usr/bin/time, a core_pattern that writes `core`
#   into the working directory, and free disk for the core (checked: BIG_MB + 1 GiB).
#
# The program (bench/big/big.c, gcc -g -O2) starts four threads that sleep, writes every
# page of BIG_MB MiB of heap (64 MiB mallocs) and aborts: the kernel writes the whole heap
# into the core (30 s for 4 GiB on the 2-core machine). Before timing, the report is checked
# byte-identical to `--whole-tables`'. Prints the same table as bench/cold-walk.sh: median
# wall (hyperfine -N) and peak resident memory (/usr/bin/time -f %M, median of PEAK_RUNS).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-$(mktemp -d -t pm-bigcore-XXXXXX)}"
RUNS="${RUNS:-5}"
BIG_MB="${BIG_MB:-4096}"
PEAK_RUNS="${PEAK_RUNS:-3}"
BASE="${POSTMORTEM_WALK_BASE:+$(realpath "${POSTMORTEM_WALK_BASE:-}")}"

NEEDS="gcc gdb eu-stack hyperfine jq /usr/bin/time"
. bench/walk-command.sh

mkdir -p "$OUT/big"
OUT="$(realpath "$OUT")"
dir="$OUT/big"
free_mb=$(df -Pm "$dir" | awk 'NR == 2 { print $4 }')
if [ "$free_mb" -lt $((BIG_MB + 1024)) ]; then
    echo "big-core: $free_mb MiB free under $dir, the core needs $BIG_MB MiB and more" >&2
    exit 2
fi
cleanup() { [ "${KEEP_CORE:-}" = 1 ] || rm -f "$dir/core"; }
trap cleanup EXIT

SRC="$(pwd)/bench/big/big.c"
(
    cd "$dir"
    rm -f core*
    gcc -g -O2 -pthread -o prog "$SRC"
    # the program dies by SIGABRT; its core is the case
    (ulimit -c unlimited; BIG_MB=$BIG_MB exec ./prog) 2>/dev/null || true
    core=$(ls core* 2>/dev/null | head -n1)
    [ -n "$core" ] || { echo "no core: check core_pattern" >&2; exit 1; }
    [ "$core" = core ] || mv "$core" core
)

size=$(awk -v b="$(stat -c %s "$dir/core")" 'BEGIN { printf "%.1f", b / 1048576 }')
pm="$PM $dir/core --symbols $dir"
$pm > "$OUT/big.report.json"
$pm --whole-tables > "$OUT/big.whole.json"
cmp -s "$OUT/big.report.json" "$OUT/big.whole.json" \
    || { echo "big: the report differs with --whole-tables" >&2; exit 1; }
eu="eu-stack -i -m -s --core $dir/core --executable $dir/prog"
gd="gdb -batch -nx -ex 'thread apply all bt' $dir/prog $dir/core"
base="$BASE $dir/core --symbols $dir"
tools="postmortem eu-stack gdb"
extra=()
if [ -n "$BASE" ]; then
    tools="base $tools"
    extra=(-n base "$base")
fi
hyperfine -N --style none --warmup 1 --runs "$RUNS" -i \
    --export-json "$OUT/big.json" \
    "${extra[@]}" -n postmortem "$pm" -n eu-stack "$eu" -n gdb "$gd" >/dev/null
printf '| case | core | tool | median wall | CPU (user+sys, mean) | peak memory |\n|---|---|---|---|---|---|\n'
for tool in $tools; do
    case $tool in
        base) cmd=$base ;;
        postmortem) cmd=$pm ;;
        eu-stack) cmd=$eu ;;
        gdb) cmd=$gd ;;
    esac
    median=$(jq -r --arg t "$tool" \
        '.results[] | select(.command == $t) | .median * 1000 | floor' "$OUT/big.json")
    cpu=$(jq -r --arg t "$tool" \
        '.results[] | select(.command == $t) | (.user + .system) * 1000 | floor' "$OUT/big.json")
    peak=$(for _ in $(seq "$PEAK_RUNS"); do
        bash -c "/usr/bin/time -f %M $cmd" 2>&1 >/dev/null | tail -n1
    done | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    printf '| big | %s MB | %s | %s ms | %s ms | %.1f MB |\n' \
        "$size" "$tool" "$median" "$cpu" "$(awk -v k="$peak" 'BEGIN { print k / 1024 }')"
done
echo "(raw figures: $OUT)" >&2
