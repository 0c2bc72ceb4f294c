#!/usr/bin/env bash
# Measures the crash service on this machine: sustained ingest (HTTP requests/s, latency
# p50/p99, measured by `hey`) and processing with warm tables (crashes/s, per-crash
# processing time p50/p99 from the stored `processing_us`), on SQLite and on PostgreSQL.
#
# Usage: bench/service.sh [BACKEND...]        BACKEND: sqlite, postgres (default: both)
# Environment:
#   POSTMORTEM_BIN   the binary (default: target/release/postmortem under CARGO_TARGET_DIR)
#   INGEST_REQUESTS  crashes uploaded per backend (default 3000)
#   CONCURRENCY      concurrent HTTP clients (default 16)
#   WORKERS          in-process worker tasks while processing (default 2); a list ("1 2")
#                    repeats phases 1 and 2 for each count, and the later phases use the
#                    last
#   PG_URL           PostgreSQL server (default postgres://postgres@127.0.0.1:5432); a
#                    database is created for the run and dropped after it
#   PG_DB_PREFIX     that database's name before `_PID_TIME` (default pm_bench; on a
#                    shared server, the prefix your databases are named with)
#   LOAD_SECONDS     length of the sustained-load phases (default 30; 0 skips them)
#   LOAD_SHARE       their upload rate as a share of phase 2's crashes/s (default 0.5)
#   LOAD_RATE        their upload rate in crashes/s, instead of LOAD_SHARE's (two builds
#                    compared at one rate)
#   WORKER_PROCS     PostgreSQL's last phase: separate `postmortem worker` processes, each
#                    with WORKERS / WORKER_PROCS worker tasks (default 2)
#   METRICS_DIR      if set, phase 2's `/metrics` is kept there as BACKEND-WORKERS.txt
# Needs: gcc, hey (apt-get install hey), curl, jq, python3, psql for PostgreSQL; and a
# core_pattern that is a plain file name (the crash program's core is written to cwd).
#
# Phases per backend: (1) `serve --workers 0`, upload the binaries, then INGEST_REQUESTS
# raw core uploads with hey: only ingest runs, so this is the ingest figure. (2) Restart
# as `serve --workers $WORKERS` on the same data: it drains the queue; the tables were
# built and stored by a warm-up crash before phase 1, so every job finds them (database,
# then memory). Crashes/s = crashes done / time to drain (from the server's start), and
# over the backlog alone: crashes stored after the first store / time from the first
# store to the last (`finished_at`, the server's start-up and first batch left out). The
# share of the workers' time in the crashes' own processing (issue 40): crashes/s × the
# p50 of `processing_us` ÷ workers, with each rate; and where the machine's CPU went
# during the drain (the cores busy, the server's CPU and PostgreSQL's backends' per
# crash, from /proc). (3) Latency under load: `serve
# --workers $WORKERS` while hey uploads at LOAD_SHARE of phase 2's rate for LOAD_SECONDS;
# each crash's upload-to-report time is its finished_at - received_at (Unix ms, as the
# API lists them), p50 / p99 / max over the phase's crashes, and the server's peak RSS
# (VmHWM). (4) PostgreSQL only: the same load with `serve --workers 0` and WORKER_PROCS
# `postmortem worker` processes, the topology of several machines on one database.
set -euo pipefail
cd "$(dirname "$0")/.."

BACKENDS=("$@")
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(sqlite postgres)
N="${INGEST_REQUESTS:-3000}"
C="${CONCURRENCY:-16}"
WORKER_COUNTS=(${WORKERS:-2})
PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432}"
BIN="${POSTMORTEM_BIN:-${CARGO_TARGET_DIR:-target}/release/postmortem}"
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release -p postmortem" >&2; exit 1; }
for tool in gcc hey curl jq python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 1; }
done

WORK="$(mktemp -d -t pm-bench-XXXXXX)"
SERVER_PID=""
WORKER_PIDS=()
PG_DB=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    [ ${#WORKER_PIDS[@]} -gt 0 ] && kill "${WORKER_PIDS[@]}" 2>/dev/null
    [ -n "$PG_DB" ] && psql "$PG_URL/postgres" -qc "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT

# The crash program of server/tests/service.rs: it dies in a comparator called by
# libc's qsort, so its stack runs through libc.
mkdir -p "$WORK/sym" "$WORK/core"
cat >"$WORK/prog.c" <<'EOF'
#include <stdlib.h>
#include <stdio.h>
static volatile int *target;
__attribute__((noinline)) static int cmp(const void *a, const void *b) {
    *target = *(const int *)a - *(const int *)b;
    return 0;
}
__attribute__((noinline)) void sort_them(int *v, size_t n) { qsort(v, n, sizeof *v, cmp); puts(""); }
int main(void) { int v[4] = {4, 3, 2, 1}; sort_them(v, 4); return 0; }
EOF
gcc -g -O0 -Wl,--build-id -o "$WORK/sym/prog" "$WORK/prog.c"
(cd "$WORK/core" && ulimit -c unlimited && { "$WORK/sym/prog" || true; }) 2>/dev/null
CORE="$(ls "$WORK"/core/core* | head -n 1)"
[ -f "$CORE" ] || { echo "bench: no core written (core_pattern?)" >&2; exit 1; }

# Every module file the core names that exists here, and its debug file.
FILES=("$WORK/sym/prog")
while IFS=$'\t' read -r path id; do
    [ -f "$path" ] && FILES+=("$path")
    dbg="/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
    [ -f "$dbg" ] && FILES+=("$dbg")
done < <("$BIN" walk "$CORE" --no-system-debug --format json |
    jq -r '.modules[] | select(.path != null and .build_id != null and .main == false) | [.path, .build_id] | @tsv')

start_server() { # data_dir workers [extra args...]
    local data="$1" workers="$2"; shift 2
    STARTS=$((${STARTS:-0} + 1))
    local out="$WORK/server-$STARTS.out"
    "$BIN" serve --listen 127.0.0.1:0 --data-dir "$data" --workers "$workers" \
        --cache-mb 256 "$@" >"$out" 2>"$WORK/server.err" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        BASE="$(sed -n 's/^postmortem listening on //p' "$out")"
        [ -n "$BASE" ] && return 0
        sleep 0.1
    done
    echo "bench: the server did not start:" >&2; cat "$WORK/server.err" >&2; exit 1
}
stop_server() { kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; }
stop_workers() {
    [ ${#WORKER_PIDS[@]} -gt 0 ] || return 0
    kill "${WORKER_PIDS[@]}" 2>/dev/null || true
    wait "${WORKER_PIDS[@]}" 2>/dev/null || true
    WORKER_PIDS=()
}
peak_kib() { # pid...: the sum of their peak resident sets, KiB
    local total=0 kib
    for pid in "$@"; do
        kib="$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status" 2>/dev/null)"
        total=$((total + ${kib:-0}))
    done
    echo "$total"
}
# Uploads at RATE crashes/s for LOAD_SECONDS, waits for the queue to drain, and prints
# upload-to-report p50 / p99 / max over the crashes received since the phase began.
# since jq_row out: one line per crash finished since `since` (ms), made by the jq
# expression `jq_row` from each crash the API lists, through every keyset page, into `out`.
done_crashes() {
    local since="$1" row="$2" out="$3" cursor="" page
    : >"$out"
    while :; do
        page="$(curl -sf "$BASE/api/v1/crashes?status=done&since=$since&limit=1000${cursor:+&cursor=$cursor}")"
        jq -r ".crashes[] | $row" <<<"$page" >>"$out"
        cursor="$(jq -r '.next_cursor // empty' <<<"$page")"
        [ -n "$cursor" ] || break
    done
}
sustained_load() { # label rate pid...
    local label="$1" rate="$2"; shift 2
    local clients=16 since drained=0
    since="$(date +%s%3N)"
    # hey's -q is per client: the rate is split over the clients
    hey -z "${LOAD_SECONDS}s" -c "$clients" -q "$(python3 -c "print(max(1, round($rate / $clients)))")" \
        -m POST -T application/octet-stream -D "$CORE" "$BASE/api/v1/crashes" >"$WORK/hey-load.txt"
    for _ in $(seq 600); do
        if [ $(( $(jobs_in pending) + $(jobs_in processing) )) -eq 0 ]; then drained=1; break; fi
        sleep 0.2
    done
    [ "$drained" = 1 ] || echo "bench: $label: the queue did not drain in 120 s" >&2
    done_crashes "$since" '(.finished_at - .received_at)' "$WORK/lat.txt"
    local sent codes
    sent="$(sed -n 's/^ *Requests\/sec: *//p' "$WORK/hey-load.txt")"
    codes="$(sed -n '/Status code distribution/,/^$/p' "$WORK/hey-load.txt" | tr -s ' \n' ' ')"
    python3 - "$label" "$rate" "$sent" "$codes" "$WORK/lat.txt" "$(peak_kib "$@")" <<'PY'
import sys
label, rate, sent, codes, latf, kib = sys.argv[1:]
lat = sorted(int(x) for x in open(latf).read().split())
if not lat:
    sys.exit(f"{label}: no crash finished")
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print(f"{label}: {float(sent):.0f} uploads/s sustained (asked {float(rate):.0f}; {codes.strip()}), "
      f"upload-to-report p50 {pct(0.5)} ms, p99 {pct(0.99)} ms, max {lat[-1]} ms over {len(lat)} crashes; "
      f"peak RSS {int(kib) / 1024:.0f} MiB")
PY
}
# CPU time of the processes, in clock ticks (utime + stime); the machine's busy ticks
# (every core, all but idle and iowait) since boot.
cpu_ticks() {
    local total=0 pid f
    for pid in "$@"; do
        f="$(cut -d')' -f2 "/proc/$pid/stat" 2>/dev/null)" || continue
        total=$((total + $(awk '{print $12 + $13}' <<<"$f")))
    done
    echo "$total"
}
machine_busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
jobs_in() { curl -sf "$BASE/metrics" | sed -n "s/^postmortem_jobs{state=\"$1\"} //p"; }

# Phase 2's figures: the rates, the per-crash time (`processing_us`) and the share.
cat >"$WORK/drain.py" <<'EOF'
import sys
(backend, rps, p50, p99, codes, pending, t0, t1, usf, job_ms, wait_s, workers,
 busy, cpu_server, cpu_db, hz, cores) = sys.argv[1:]
rows = [l.split("\t") for l in open(usf).read().splitlines()]
us = sorted(int(u) for u, *_ in rows if u not in ("", "null"))
ends = sorted(int(f) for _, f, *_ in rows if f not in ("", "null"))
if not us or len(ends) < 2:
    sys.exit(f"{backend}: no per-crash times (processing_us): a binary from before migration 0032?")
pct = lambda q: us[min(len(us) - 1, int(q * len(us)))] / 1000
w = int(workers)
label = f"{backend}, {w} worker{'s' if w > 1 else ''}"
print(f"{label}: ingest {float(rps):.0f} req/s, latency p50 {float(p50)*1000:.1f} ms, p99 {float(p99)*1000:.1f} ms ({codes.strip()}; {pending} queued)")
drain = float(t1) - float(t0)
rate = int(pending) / drain
# over the backlog alone: the crashes stored after the first store, over the time from it
# to the last (the server's start-up and the first batch's claim and jobs are left out)
after_first = sum(1 for f in ends if f > ends[0])
span = (ends[-1] - ends[0]) / 1000
backlog = after_first / span if span > 0 else float("nan")
print(f"{label}: processing {rate:.0f} crashes/s ({pending} in {drain:.2f} s from the server's start), "
      f"{backlog:.0f} crashes/s over the backlog ({after_first} in {span:.2f} s); {len(us)} done")
print(f"{label}: per crash p50 {pct(0.5):.3f} ms, p99 {pct(0.99):.3f} ms (processing_us); "
      f"mean of the job's steps {float(job_ms):.3f} ms")
share = lambda r: r * pct(0.5) / 1000 / w
print(f"{label}: share = crashes/s x p50 / workers = {share(rate):.2f} (from the start), "
      f"{share(backlog):.2f} (over the backlog)")
# Where the workers' wall time went, from the start (drain time x workers): the jobs at
# their p50 (the share), the jobs' time above their p50 (the skew), the waits after a
# batch's jobs (step `wait`), and the rest (start-up, the first claim, idle, the loop).
wall = drain * w
at_p50 = len(us) * pct(0.5) / 1000
above = sum(us) / 1e6 - at_p50
wait = float(wait_s)
rest = wall - at_p50 - above - wait
print(f"{label}: workers' time {wall:.2f} s: jobs at p50 {at_p50 / wall:.2f}, jobs above p50 "
      f"{above / wall:.2f} (mean {sum(us) / len(us) / 1000:.3f} ms), wait {wait / wall:.2f}, "
      f"rest {rest / wall:.2f}")
# A job's time by its place in its batch (one batch: the crashes one store finished, in
# the claim's order): the first job of a batch looks up its modules' files for the rest.
batches = {}
for u, f, r, i in rows:
    if u not in ("", "null") and f not in ("", "null"):
        batches.setdefault(int(f), []).append((int(r), i, int(u)))
places = {}
for b in batches.values():
    for k, (_, _, u) in enumerate(sorted(b)):
        places.setdefault(min(k, 8), []).append(u / 1000)
parts = []
for name, ks in (("first", [0]), ("2nd-8th", range(1, 8)), ("later", [8])):
    v = sorted(u for k in ks for u in places.get(k, []))
    if v:
        parts.append(f"{name} {len(v)}: p50 {v[len(v) // 2]:.3f} ms, mean {sum(v) / len(v):.3f} ms")
print(f"{label}: jobs by place in their batch ({len(batches)} batches): " + "; ".join(parts))
# Where the machine's CPU went during the drain: the cores busy (every process), the
# server's CPU and PostgreSQL's backends' for this database, per crash, beside the jobs'
# own time per crash (their mean). With the cores full, the share cannot pass the jobs'
# part of the CPU the workers can have.
hz, n = float(hz), int(pending)
per = lambda ticks: float(ticks) / hz / n * 1000
print(f"{label}: cpu: {float(busy) / hz / drain:.2f} of {cores} cores busy; per crash: server "
      f"{per(cpu_server):.3f} ms, PostgreSQL {per(cpu_db):.3f} ms, jobs (mean) "
      f"{sum(us) / len(us) / 1000:.3f} ms")
EOF

echo "postmortem service bench: $(nproc) cores, $N crashes of $(stat -c %s "$CORE") bytes, $C clients, ${WORKER_COUNTS[*]} workers; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "files: ${FILES[*]##*/}"
for backend in "${BACKENDS[@]}"; do
    data="$WORK/data-$backend"
    extra=()
    if [ "$backend" = postgres ]; then
        PG_DB="${PG_DB_PREFIX:-pm_bench}_$$_$(date +%s)"
        psql "$PG_URL/postgres" -qc "CREATE DATABASE $PG_DB" >/dev/null
        extra=(--database-url "$PG_URL/$PG_DB")
    fi

    # Warm-up: binaries, then one crash processed so every table is built and stored.
    start_server "$data" 1 "${extra[@]}"
    for f in "${FILES[@]}"; do
        curl -sf -o /dev/null -H "x-file-name: ${f##*/}" --data-binary "@$f" "$BASE/api/v1/binaries"
    done
    status="$(curl -sf --data-binary "@$CORE" "$BASE/api/v1/crashes?wait=60" | jq -r .status)"
    [ "$status" = done ] || { echo "bench: warm-up crash ended $status" >&2; exit 1; }
    stop_server

    for WORKERS in "${WORKER_COUNTS[@]}"; do
        # Phase 1: ingest only.
        since="$(date +%s%3N)"
        start_server "$data" 0 "${extra[@]}"
        hey -n "$N" -c "$C" -m POST -T application/octet-stream -D "$CORE" \
            "$BASE/api/v1/crashes" >"$WORK/hey.txt"
        rps="$(sed -n 's/^ *Requests\/sec: *//p' "$WORK/hey.txt")"
        p50="$(awk '/ 50% in /{print $3}' "$WORK/hey.txt")"
        p99="$(awk '/ 99% in /{print $3}' "$WORK/hey.txt")"
        codes="$(sed -n '/Status code distribution/,/^$/p' "$WORK/hey.txt" | tr -s ' \n' ' ')"
        pending="$(jobs_in pending)"
        stop_server

        # Phase 2: drain the queue with warm tables.
        busy0="$(machine_busy)"
        t0="$(date +%s.%N)"
        start_server "$data" "$WORKERS" "${extra[@]}"
        while :; do
            left=$(( $(jobs_in pending) + $(jobs_in processing) ))
            [ "$left" -eq 0 ] && break
            sleep 0.2
        done
        t1="$(date +%s.%N)"
        busy1="$(machine_busy)"
        cpu_server="$(cpu_ticks "$SERVER_PID")"
        cpu_db=0
        if [ "$backend" = postgres ]; then
            cpu_db="$(cpu_ticks $(psql "$PG_URL/postgres" -Atc \
                "SELECT pid FROM pg_stat_activity WHERE datname = '$PG_DB'"))"
        fi
        [ -n "${METRICS_DIR:-}" ] && curl -sf "$BASE/metrics" >"$METRICS_DIR/$backend-$WORKERS.txt"
        # Where the workers' time went: each step's total and mean, from /metrics.
        curl -sf "$BASE/metrics" | awk -v backend="$backend" -v workers="$WORKERS" '
            /^postmortem_job_step_seconds_(sum|count)/ {
                match($0, /step="[a-z]+"/); step = substr($0, RSTART + 6, RLENGTH - 7)
                if ($0 ~ /_sum/) sum[step] = $2; else count[step] = $2
            }
            END {
                n = split("claim read tables engine serialize store wait", order, " ")
                line = backend ", " workers " workers: step seconds total / mean ms:"
                for (i = 1; i <= n; i++) {
                    s = order[i]
                    if (count[s] > 0) line = line sprintf(" %s %.2f / %.3f", s, sum[s], 1000 * sum[s] / count[s])
                }
                print line " (claim, store and wait per batch)"
                job = 0
                split("read tables engine serialize", own, " ")
                for (i = 1; i <= 4; i++) if (count[own[i]] > 0) job += sum[own[i]] / count[own[i]]
                print 1000 * job, sum["wait"] + 0 > "/dev/stderr"
            }' 2>"$WORK/job_ms.txt"
        # Per-crash processing time and end, from every crash of this round (keyset pages).
        done_crashes "$since" '[.processing_us, .finished_at, .received_at, .id] | @tsv' "$WORK/us.txt"
        stop_server
        python3 "$WORK/drain.py" "$backend" "$rps" "$p50" "$p99" "$codes" "$pending" "$t0" "$t1" \
            "$WORK/us.txt" $(cat "$WORK/job_ms.txt") "$WORKERS" \
            "$((busy1 - busy0))" "$cpu_server" "$cpu_db" "$(getconf CLK_TCK)" "$(nproc)"
    done
    rate="${LOAD_RATE:-$(python3 -c "print($pending / ($t1 - $t0) * ${LOAD_SHARE:-0.5})")}"
    if [ "${LOAD_SECONDS:-30}" != 0 ]; then
        LOAD_SECONDS="${LOAD_SECONDS:-30}"
        # Phase 3: latency under a sustained load, workers in the server.
        start_server "$data" "$WORKERS" "${extra[@]}"
        sustained_load "$backend, $WORKERS workers in serve" "$rate" "$SERVER_PID"
        stop_server
        if [ "$backend" = postgres ]; then
            # Phase 4: the same load, the workers in processes of their own.
            procs="${WORKER_PROCS:-2}"
            start_server "$data" 0 "${extra[@]}"
            for _ in $(seq "$procs"); do
                "$BIN" worker --data-dir "$data" "${extra[@]}" --cache-mb 256 \
                    --workers $(( (WORKERS + procs - 1) / procs )) >/dev/null 2>>"$WORK/server.err" &
                WORKER_PIDS+=($!)
            done
            sustained_load "$backend, $procs worker processes" "$rate" "$SERVER_PID" "${WORKER_PIDS[@]}"
            stop_workers
            stop_server
        fi
    fi
    if [ -n "$PG_DB" ]; then
        psql "$PG_URL/postgres" -qc "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null
        PG_DB=""
    fi
done
