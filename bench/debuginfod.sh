#!/usr/bin/env bash
# A cold walk with every module's files fetched from a debuginfod server, beside the same
# walk from local files, and the walk after it (the files kept in the cache).
#
# Usage: bench/debuginfod.sh [OUT_DIR]     (default: a new temporary directory)
# Environment:
#   POSTMORTEM_BIN       the binary (default: target/release/postmortem under
#                        CARGO_TARGET_DIR, built by this script)
#   POSTMORTEM_WALK_BIN  time this `postmortem-walk` instead of `postmortem walk`
#   RUNS                 hyperfine runs per command (default 20, after 3 warm-up runs)
# Needs: gcc, objcopy, debuginfod (elfutils' server), libc6-dbg, hyperfine, jq, and a
#   core_pattern that writes `core` into the working directory.
#
# The core is bench/cold-walk.sh's `blocked` case (20 threads blocked in six calls while
# main aborts). The server is elfutils' `debuginfod` on a free local port over a folder
# holding what a distribution's server holds: the program stripped and its debug file,
# libc and the loader with their debug files from /usr/lib/debug. Timed (median wall):
#   local    postmortem walk CORE --symbols DIR              (the files on this machine)
#   fetched  the walk with no local file (--no-dump-paths --no-system-debug) and
#            --debuginfod URL, the cache emptied before each run: every file downloaded
#   cached   the same walk with the cache kept: no request
# Before timing, the fetched walk's threads must equal the local walk's (the script
# stops if not).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-$(mktemp -d -t pm-debuginfod-bench-XXXXXX)}"
RUNS="${RUNS:-20}"

NEEDS="gcc objcopy debuginfod hyperfine jq curl python3"
. bench/walk-command.sh

mkdir -p "$OUT"
OUT="$(realpath "$OUT")"
SRC="$(pwd)/bench/cold"
dir="$OUT/blocked"
served="$OUT/served"
rm -rf "$dir" "$served" && mkdir -p "$dir" "$served"
(
    cd "$dir"
    gcc -g -O2 -pthread -o prog "$SRC/blocked.c"
    (ulimit -c unlimited; exec ./prog) 2>/dev/null || true
    core=$(ls core* 2>/dev/null | head -n1)
    [ -n "$core" ] || { echo "no core: check core_pattern" >&2; exit 1; }
    [ "$core" = core ] || mv "$core" core
)
unset DEBUGINFOD_URLS
local_report="$OUT/local.json"
$PM "$dir/core" --symbols "$dir" --offline > "$local_report"

# what a distribution's debuginfod holds for these modules
objcopy --strip-debug "$dir/prog" "$served/prog"
objcopy --only-keep-debug "$dir/prog" "$served/prog.debug"
files=2
while read -r name path id; do
    cp "$path" "$served/$name"
    files=$((files + 1))
    debug="/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
    if [ -f "$debug" ]; then
        cp "$debug" "$served/$name.dbg"
        files=$((files + 1))
    fi
done < <(jq -r '.modules[] | select(.main | not) | select(.path != null and .build_id != null)
                | "\(.name) \(.path) \(.build_id)"' "$local_report" | while read -r n p i; do
            [ -f "$p" ] && echo "$n $p $i"; done)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
debuginfod -F -t0 -g0 -p "$port" -d "$OUT/db.sqlite" "$served" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port"
for _ in $(seq 600); do
    if curl -s "$url/metrics" | grep -q "scanned_files_total{source=\"file\"} $files"; then
        break
    fi
    sleep 0.1
done

cache="$OUT/cache"
fetched="$PM $dir/core --no-dump-paths --no-system-debug --debuginfod $url --cache-dir $cache"
rm -rf "$cache"
$fetched > "$OUT/fetched.json"
cmp -s <(jq -S .threads "$local_report") <(jq -S .threads "$OUT/fetched.json") \
    || { echo "the fetched walk's threads differ from the local walk's" >&2; exit 1; }

# one --prepare per command, in order (a single one would run before every command)
hyperfine -N --style none --warmup 3 --runs "$RUNS" --export-json "$OUT/times.json" \
    --prepare true --prepare true --prepare "rm -rf $cache" \
    -n local "$PM $dir/core --symbols $dir --offline" \
    -n cached "$fetched" \
    -n fetched "$fetched" >/dev/null
printf '| walk of the blocked core (%s modules fetched) | median wall |\n|---|---|\n' \
    "$(jq '[.modules[] | select(.lookups != null)] | length' "$OUT/fetched.json")"
for t in local cached fetched; do
    printf '| %s | %s ms |\n' "$t" \
        "$(jq -r --arg t "$t" '.results[] | select(.command == $t) | .median * 1000 | floor' "$OUT/times.json")"
done
echo "(raw figures: $OUT)" >&2
