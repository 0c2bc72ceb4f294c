#!/usr/bin/env bash
# A 2 GB debug file (issue 40): a program whose DWARF is ~2 GB (UNITS copies of a unit of
# types alone beside its own small unit, as a large C++ program's debug file repeats a
# header's types in every unit) crashes, and its core is walked with that file beside
# eu-stack: the walk must read the units its frames need, not the file.
#
# Usage: bench/big-debug.sh [OUT_DIR]     (default: a new temporary directory)
# Environment:
#   POSTMORTEM_BIN / POSTMORTEM_WALK_BIN  as bench/cold-walk.sh (bench/walk-command.sh)
#   UNITS    copies of the unit of types (default 720: 2.0 GB of .debug_info)
#   RUNS     hyperfine runs per command (default 5, after 1 warm-up run)
#   GDB=1    also walk with gdb, once (it reads the whole file: minutes and gigabytes)
#   KEEP=1   leave the program and its core in OUT_DIR (deleted at the end otherwise); a
#            later run on the same OUT_DIR walks them again instead of building them
#   LINKER   gcc's -fuse-ld (default bfd: 27 min and 3.7 GB for this link on the loaded
#            2-core machine; lld: 11 min and 13.6 GB)
# Needs: gcc, eu-stack, hyperfine, jq, /usr/bin/time, python3, a core_pattern that writes
#   `core` into the working directory, 4.5 GB of free disk.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-$(mktemp -d -t pm-bigdebug-XXXXXX)}"
RUNS="${RUNS:-5}"
UNITS="${UNITS:-720}"
LINKER="${LINKER:-bfd}"
NEEDS="gcc eu-stack hyperfine jq /usr/bin/time python3"
. bench/walk-command.sh

mkdir -p "$OUT/big-debug"
OUT="$(realpath "$OUT")"
dir="$OUT/big-debug"
free_mb=$(df -Pm "$dir" | awk 'NR == 2 { print $4 }')
if [ "$free_mb" -lt 4608 ]; then
    echo "big-debug: $free_mb MiB free under $dir, the program and its objects need 4.5 GB" >&2
    exit 2
fi
cleanup() { [ "${KEEP:-}" = 1 ] || rm -f "$dir/prog" "$dir/core" "$dir/types.o"; }
trap cleanup EXIT

SRC="$(pwd)/bench/big/big_debug.c"
# a program and core kept by an earlier run (KEEP=1) are walked again, not rebuilt
[ -f "$dir/prog" ] && [ -f "$dir/core" ] || (
    cd "$dir"
    rm -f core*
    # 10,000 structures of 20 members: one unit of them is 2.8 MB of .debug_info
    python3 - <<'PY'
with open("types.h", "w") as f:
    for s in range(10000):
        f.write("struct record_type_%05d {\n" % s)
        for m in range(20):
            f.write("  int member_field_%02d_of_%05d;\n" % (m, s))
        f.write("};\n")
PY
    printf '#include "types.h"\n' > types.c
    gcc -g -O1 -fno-eliminate-unused-debug-types -c types.c -o types.o
    gcc -g -O0 -c "$SRC" -o main.o
    objs=()
    for _ in $(seq "$UNITS"); do objs+=(types.o); done
    gcc -fuse-ld="$LINKER" -g -o prog main.o "${objs[@]}"
    rm -f main.o types.c types.h
    (ulimit -c unlimited; exec ./prog) 2>/dev/null || true
    core=$(ls core* 2>/dev/null | head -n1)
    [ -n "$core" ] || { echo "no core: check core_pattern" >&2; exit 1; }
    [ "$core" = core ] || mv "$core" core
)

info=$(readelf -SW "$dir/prog" | awk '$2 == ".debug_info" { print strtonum("0x" $6) }')
size=$(awk -v b="$(stat -c %s "$dir/prog")" 'BEGIN { printf "%.0f", b / 1048576 }')
echo "prog: $size MiB, .debug_info $((info / 1048576)) MiB in $((UNITS + 1)) units and the C runtime's" >&2
pm="$PM $dir/core --symbols $dir"
# every frame of the crash, named from the DWARF, in order
$pm --format text > "$OUT/big-debug.txt"
want="crash_here middle outer outer outer outer main"
got=$(sed -nE 's/^#[0-9]+ +0x[0-9a-f]+ in ([^ ]+) .*/\1/p' "$OUT/big-debug.txt" | tr '\n' ' ' | sed 's/ $//')
case "$got" in
    "$want"*) ;;
    *) echo "big-debug: frames '$got', expected '$want'" >&2; exit 1 ;;
esac
eu="eu-stack -i -m -s --core $dir/core --executable $dir/prog"
hyperfine -N --style none --warmup 1 --runs "$RUNS" -i --export-json "$OUT/big-debug.json" \
    -n postmortem "$pm" -n eu-stack "$eu" >/dev/null
printf '| case | debug file | tool | median wall | CPU (user+sys, mean) | peak memory |\n|---|---|---|---|---|---|\n'
row() {
    local tool=$1 cmd=$2 median cpu peak
    median=$(jq -r --arg t "$tool" \
        '.results[] | select(.command == $t) | .median * 1000 | floor' "$OUT/big-debug.json")
    cpu=$(jq -r --arg t "$tool" \
        '.results[] | select(.command == $t) | (.user + .system) * 1000 | floor' "$OUT/big-debug.json")
    peak=$(bash -c "/usr/bin/time -f %M $cmd" 2>&1 >/dev/null | tail -n1)
    printf '| big debug | %s MiB | %s | %s ms | %s ms | %.1f MB |\n' \
        "$size" "$tool" "$median" "$cpu" "$(awk -v k="$peak" 'BEGIN { print k / 1024 }')"
}
row postmortem "$pm"
row eu-stack "$eu"
if [ "${GDB:-}" = 1 ]; then
    gd="gdb -batch -nx -ex 'thread apply all bt' $dir/prog $dir/core"
    /usr/bin/time -f '%e %M' -o "$OUT/gdb.time" bash -c "$gd" > "$OUT/gdb.txt" 2>&1 || true
    read -r secs kb < "$OUT/gdb.time"
    printf '| big debug | %s MiB | gdb (1 run) | %.0f ms | – | %.1f MB |\n' \
        "$size" "$(awk -v s="$secs" 'BEGIN { print s * 1000 }')" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')"
fi
echo "(raw figures: $OUT)" >&2
