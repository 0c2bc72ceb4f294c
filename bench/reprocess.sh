#!/usr/bin/env bash
# `postmortem reprocess --all` over many stored crashes, SIGKILLed halfway and started
# again: checks in the database that the second start resumed the same run and that every
# crash was completed exactly once by it, and prints the rate.
#
# Usage: bench/reprocess.sh [N]              N stored crashes (default 10000)
# Environment:
#   POSTMORTEM_BIN  the binary (default: target/release/postmortem under CARGO_TARGET_DIR,
#                   built by this script with `cargo build --release -p postmortem`)
#   WORKERS         worker tasks of `reprocess --process` (default 2)
#   LEASE_SECS      job lease of `reprocess` (default 2; renewed while a job runs)
#   KEEP            a directory to keep the data dir in (default: a temporary one, removed)
# Needs: gcc, curl, jq, sqlite3, and a core_pattern that is a plain file name.
#
# Steps: (1) three small C programs are compiled and crashed here; `postmortem serve`
# receives the two programs' binaries (the third stays missing) and one core of each,
# and processes them. (2) The server is stopped and the three processed crashes are
# cloned in the database to N rows (same dump blobs and reports, new ids, spread over
# time), so the store holds N processed crashes, each completed once. (3) `postmortem
# reprocess --all --process` runs until about N/2 crashes are done by it, is SIGKILLed,
# and is started again with the same arguments; it must say "(resumed)" and finish.
# (4) In the database: one run, finished; every crash carries that run id, is `done`, and
# has `completions` = 2 (once before, once by the run: a crash processed twice by the run
# would show 3, the lease guard's counter). Rate = N / (time of run 1 + time of run 2).
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-10000}"
WORKERS="${WORKERS:-2}"
LEASE_SECS="${LEASE_SECS:-2}"
for tool in gcc curl jq sqlite3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 1; }
done
if [ -z "${POSTMORTEM_BIN:-}" ]; then
    cargo build --release -p postmortem >&2
    POSTMORTEM_BIN="${CARGO_TARGET_DIR:-target}/release/postmortem"
fi
BIN="$(realpath "$POSTMORTEM_BIN")"

WORK="$(mktemp -d -t pm-reprocess-XXXXXX)"
DATA="${KEEP:-$WORK}/data"
SERVER_PID=""
RUN_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    [ -n "$RUN_PID" ] && kill -9 "$RUN_PID" 2>/dev/null && wait "$RUN_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
rm -rf "$DATA"
DB="$DATA/postmortem.db"
sql() { sqlite3 -cmd ".timeout 10000" "$DB" "$@"; }

# (1) Three programs, three crashes.
programs=(
    'void boom(volatile int *p) { *p = 1; } int main(void) { boom((volatile int *)0); return 0; }'
    '#include <stdlib.h>
     #include <string.h>
     __attribute__((noinline)) void check(const char *s) { if (strlen(s) < 8) abort(); }
     int main(void) { check("short"); return 0; }'
    '__attribute__((noinline)) int depth(volatile int *p, int n) { return n ? depth(p, n - 1) + 1 : *p; }
     int main(void) { return depth((volatile int *)16, 5); }'
)
for i in 0 1 2; do
    mkdir -p "$WORK/p$i"
    printf '%s\n' "${programs[$i]}" >"$WORK/p$i/prog.c"
    gcc -g -O0 -Wl,--build-id -o "$WORK/p$i/prog$i" "$WORK/p$i/prog.c"
    (cd "$WORK/p$i" && ulimit -c unlimited && { "./prog$i" || true; }) 2>/dev/null
    ls "$WORK/p$i"/core* >/dev/null 2>&1 || { echo "bench: no core written (core_pattern?)" >&2; exit 1; }
done

"$BIN" serve --listen 127.0.0.1:0 --data-dir "$DATA" --workers 2 >"$WORK/serve.out" 2>"$WORK/serve.err" &
SERVER_PID=$!
BASE=""
for _ in $(seq 100); do
    BASE="$(sed -n 's/^postmortem listening on //p' "$WORK/serve.out")"
    [ -n "$BASE" ] && break
    sleep 0.1
done
[ -n "$BASE" ] || { echo "bench: the server did not start" >&2; cat "$WORK/serve.err" >&2; exit 1; }
for i in 0 1; do
    curl -sf -o /dev/null -H "x-file-name: prog$i" --data-binary "@$WORK/p$i/prog$i" "$BASE/api/v1/binaries"
done
for i in 0 1 2; do
    core="$(ls "$WORK/p$i"/core* | head -n 1)"
    status="$(curl -sf --data-binary "@$core" "$BASE/api/v1/crashes?wait=60" | jq -r .status)"
    [ "$status" = done ] || { echo "bench: crash of prog$i ended $status" >&2; exit 1; }
done
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""

# (2) N processed crashes: the three and N-3 clones of them.
sql "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $N - 4),
     s AS (SELECT row_number() OVER (ORDER BY id) - 1 AS k, * FROM crashes)
     INSERT INTO crashes (id, status, received_at, dump_sha256, dump_size, dump_format,
         annotations, attempts, report, signature, started_at, finished_at, processing_ms,
         completions, function_frames)
     SELECT lower(hex(randomblob(16))), 'done', s.received_at - 1000 * (n.i + 1), s.dump_sha256,
         s.dump_size, s.dump_format, s.annotations, 1, s.report, s.signature, s.started_at,
         s.finished_at, s.processing_ms, s.completions, s.function_frames
     FROM n JOIN s ON s.k = n.i % 3;"
stored="$(sql "SELECT COUNT(*) FROM crashes WHERE status = 'done' AND completions = 1")"
[ "$stored" -eq "$N" ] || { echo "bench: stored $stored processed crashes, not $N" >&2; exit 1; }
echo "postmortem reprocess bench: $(nproc) cores, $N stored crashes (3 distinct cores, SQLite), $WORKERS workers"
echo "binary: $BIN"

# (3) Run, SIGKILL at about half, run again.
# A short lease (renewed while a job runs): the jobs the killed process held are taken
# over 2 s after the kill instead of the default 60.
args=(reprocess --data-dir "$DATA" --all --process --workers "$WORKERS" --lease-secs "$LEASE_SECS")
t0="$(date +%s.%N)"
"$BIN" "${args[@]}" >"$WORK/run1.out" 2>"$WORK/run1.err" &
RUN_PID=$!
while :; do
    done1="$(sql "SELECT COUNT(*) FROM crashes WHERE reprocess_run IS NOT NULL AND status = 'done'")"
    [ "$done1" -ge $((N / 2)) ] && break
    kill -0 "$RUN_PID" 2>/dev/null || { echo "bench: the first run ended before half:" >&2; cat "$WORK/run1.out" "$WORK/run1.err" >&2; exit 1; }
    sleep 0.05
done
kill -9 "$RUN_PID"; wait "$RUN_PID" 2>/dev/null || true; RUN_PID=""
t1="$(date +%s.%N)"
done1="$(sql "SELECT COUNT(*) FROM crashes WHERE reprocess_run IS NOT NULL AND status = 'done'")"
echo "run 1: $(head -n 1 "$WORK/run1.out"); SIGKILLed with $done1 of $N done"
t2="$(date +%s.%N)"
"$BIN" "${args[@]}" >"$WORK/run2.out" 2>"$WORK/run2.err"
t3="$(date +%s.%N)"
sed 's/^/run 2: /' "$WORK/run2.out"
grep -q '(resumed)' "$WORK/run2.out" || { echo "bench: the second run did not resume" >&2; exit 1; }

# (4) Exactly once, in the database.
runs="$(sql "SELECT COUNT(*) || ' ' || COUNT(finished_at) FROM reprocess_runs")"
run_id="$(sql "SELECT id FROM reprocess_runs")"
by_run="$(sql "SELECT COUNT(*) FROM crashes WHERE reprocess_run = '$run_id' AND status = 'done'")"
once="$(sql "SELECT COUNT(*) FROM crashes WHERE completions = 2")"
other="$(sql "SELECT COUNT(*) FROM crashes WHERE completions <> 2")"
echo "database: runs (total finished) $runs; crashes done by run $run_id: $by_run; completed exactly once by it: $once; otherwise: $other"
ok=1
[ "$runs" = "1 1" ] || ok=0
[ "$by_run" -eq "$N" ] || ok=0
[ "$once" -eq "$N" ] || ok=0
[ "$other" -eq 0 ] || ok=0
[ "$done1" -gt 0 ] && [ "$done1" -lt "$N" ] || ok=0
awk -v n="$N" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN {
    r1 = b - a; r2 = d - c
    printf "time: run 1 %.1f s (until SIGKILL) + run 2 %.1f s = %.1f s: %.0f crashes/s\n", r1, r2, r1 + r2, n / (r1 + r2)
}'
if [ "$ok" -eq 1 ]; then
    echo "OK: every crash reprocessed exactly once across the kill"
else
    echo "FAILED: see the counts above" >&2
    exit 1
fi
