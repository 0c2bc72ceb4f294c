#!/usr/bin/env bash
# A store that grows: a million crashes of 5,000 signatures over 90 days, filled through
# the store's own insert path (`postmortem bench store`: insert, lease, finish in batches,
# as workers do), on SQLite and on PostgreSQL, and analyzed at its end (SQLite: the
# service's own `PRAGMA optimize`, which it runs at start and every sweep interval;
# PostgreSQL: `VACUUM ANALYZE`, what autovacuum does a little later); then the time of
# every dashboard and reprocess query on it, the dashboard's pages through a real server
# (curl, medians), and the database's bytes per crash.
#
# Usage: bench/store.sh [BACKEND...]      BACKEND: sqlite, postgres (default: both)
# Environment:
#   POSTMORTEM_BIN  the binary (default: target/release/postmortem under CARGO_TARGET_DIR)
#   CRASHES         crashes filled (default 1000000)
#   SIGNATURES      distinct signatures (default 5000)
#   DAYS            days the crashes are spread over (default 90)
#   RUNS            repetitions of each query and page (default 7)
#   PG_URL          PostgreSQL server (default postgres://postgres@127.0.0.1:5432); a
#                   database is created for the run and dropped after it
#   KEEP            set to keep the SQLite file and the PostgreSQL database (their
#                   places are printed)
#   FILLERS         batches filled at once on PostgreSQL (default 1), as several workers
#   SQLITE_FILE     a kept SQLite store to go on with: filled up to CRASHES (an interrupted
#                   fill resumes; a full one is not filled again), then timed
#   PG_NAME         the same for a kept PostgreSQL database (on PG_URL's server)
#   TIME_ONLY       set to time the stores named by SQLITE_FILE / PG_NAME without filling
# Needs: gcc, curl, psql (PostgreSQL), a plain core_pattern (the template report is the
# walk of a freshly crashed program). Disk: ~12 kB per crash per backend.
set -euo pipefail
cd "$(dirname "$0")/.."

BACKENDS=("$@")
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(sqlite postgres)
CRASHES="${CRASHES:-1000000}"
SIGNATURES="${SIGNATURES:-5000}"
DAYS="${DAYS:-90}"
RUNS="${RUNS:-7}"
PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432}"
FILLERS="${FILLERS:-1}"
BIN="${POSTMORTEM_BIN:-${CARGO_TARGET_DIR:-target}/release/postmortem}"
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release -p postmortem" >&2; exit 1; }

# the slow-statement warnings would drown the table
export RUST_LOG="${RUST_LOG:-error}"
WORK="$(mktemp -d -t pm-store-XXXXXX)"
SERVER_PID=""
PG_DB=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    if [ -n "$PG_DB" ] && [ -z "${KEEP:-}" ] && [ -z "${PG_NAME:-}" ]; then
        psql "$PG_URL/postgres" -qc "DROP DATABASE IF EXISTS $PG_DB" >/dev/null 2>&1 || true
    fi
    [ -z "${KEEP:-}" ] && rm -rf "$WORK"
}
trap cleanup EXIT

# The template: the report of a small program that crashed here.
cat >"$WORK/c.c" <<'EOF'
#include <stdio.h>
__attribute__((noinline)) void crash_site(int *p) { *p = 1; puts(""); }
__attribute__((noinline)) void caller(int *p) { crash_site(p); puts(""); }
int main(void) { caller((int *)0); return 0; }
EOF
gcc -g -O1 -o "$WORK/c" "$WORK/c.c"
(cd "$WORK" && ulimit -c unlimited && ./c) 2>/dev/null || true
core="$(ls "$WORK"/core* | head -n 1)"
"$BIN" walk "$core" --symbols "$WORK" --format json >"$WORK/report.json"

# Median of curl's total time of GET $1, over RUNS requests, in ms (and a status that
# was not 200).
page_ms() {
    for _ in $(seq "$RUNS"); do
        curl -sS -o /dev/null -w '%{time_total} %{http_code}\n' "$1"
    done | sort -n | awk '$2 != 200 { bad = $2 } { t[NR] = $1 }
        END { printf "%.1f", t[int((NR + 1) / 2)] * 1000; if (bad) printf " (HTTP %s)", bad }'
}

for backend in "${BACKENDS[@]}"; do
    case "$backend" in
        sqlite) DB="sqlite://${SQLITE_FILE:-$WORK/store.db}?mode=rwc" ;;
        postgres)
            if [ -n "${PG_NAME:-}" ]; then
                PG_DB="$PG_NAME"
            else
                PG_DB="pm_store_$$"
                psql "$PG_URL/postgres" -qc "CREATE DATABASE $PG_DB" >/dev/null
            fi
            DB="$PG_URL/$PG_DB"
            ;;
        *) echo "unknown backend $backend" >&2; exit 2 ;;
    esac
    echo "== $backend: $CRASHES crashes, $SIGNATURES signatures, $DAYS days ($DB)"
    if [ -z "${TIME_ONLY:-}" ]; then
        /usr/bin/time -f "fill: %e s, peak RSS %M kB" "$BIN" bench store --db "$DB" \
            --report "$WORK/report.json" --crashes "$CRASHES" --signatures "$SIGNATURES" \
            --days "$DAYS" --fillers "$FILLERS" --fill-only
    fi
    "$BIN" bench store --db "$DB" --time-only --runs "$RUNS" \
        --crashes "$CRASHES" --signatures "$SIGNATURES" --days "$DAYS"

    # The pages, through a real server on the same database.
    mkdir -p "$WORK/data-$backend"
    "$BIN" serve --database-url "$DB" --data-dir "$WORK/data-$backend" --listen 127.0.0.1:0 \
        --workers 0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        base="$(sed -n 's/^postmortem listening on //p' "$WORK/serve.out" 2>/dev/null || true)"
        [ -n "$base" ] && break
        sleep 0.1
    done
    [ -n "$base" ] || { cat "$WORK/serve.err" >&2; exit 1; }
    id="$(curl -sS "$base/api/v1/crashes?limit=1" | sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' | head -n 1)"
    hot="crash_site_0%20%7C%20caller_0%20%7C%20main"
    printf '%-52s %10s\n' "page" "median"
    from="$(date -u -d '-7 days' +%F)"
    for page in "/?days=30" "/?days=90" "/?days=all" "/?days=90&product=App1" \
        "/?days=90&version=1.3" "/?days=30&kind=null-pointer" "/?days=30&sort=last_seen" \
        "/?days=90&sort=signature&dir=asc" "/?project=default" \
        "/crashes" "/crashes?project=default" "/crashes?function=crash_site_17" \
        "/crashes?signature=$hot" "/crashes?module=libc.so.6" "/crashes?status=done" \
        "/crashes?product=App2&from=$from" "/crashes?version=1.3" \
        "/crashes?kind=null-pointer" "/crashes/$id" "/missing" "/binaries" "/jobs" \
        "/metrics"; do
        printf '%-52s %8sms\n' "$page" "$(page_ms "$base$page")"
    done
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
    [ -n "${KEEP:-}" ] && echo "kept: $DB"
    if [ "$backend" = postgres ] && [ -z "${KEEP:-}" ] && [ -z "${PG_NAME:-}" ]; then
        psql "$PG_URL/postgres" -qc "DROP DATABASE $PG_DB" >/dev/null; PG_DB=""
    fi
done
