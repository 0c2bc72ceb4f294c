#!/usr/bin/env bash
# Soak of the crash service (issue 16): mixed valid and hostile uploads from CLIENTS
# concurrent clients, slow ones included, while the server and a `postmortem worker` are
# SIGKILLed every KILL_EVERY seconds, on PostgreSQL (a fresh database, dropped after).
#
# Usage: bench/soak.sh
# Environment:
#   DURATION       seconds of load (default 1800: the issue's 30 minutes)
#   CLIENTS        concurrent clients (default 64)
#   KILL_EVERY     seconds between SIGKILLs of the server and the worker (default 180)
#   POSTMORTEM_BIN the binary (default: target/release/postmortem under CARGO_TARGET_DIR)
#   PG_URL         PostgreSQL server (default postgres://postgres@127.0.0.1:5432)
# Needs: gcc, curl, jq, python3, psql; a core_pattern that is a plain file name.
#
# Each client loops until DURATION is over, one upload at a time, every request bounded
# by curl's --max-time: valid cores with an Idempotency-Key, retried (same key) until
# answered, at most 20 times; the same at 64 KiB/s (slow clients); garbage (422);
# uploads cut off mid-body (curl gives up); bodies over --max-body-mb (413).
# At the end the server is started once more with a short sweep age, the queue drains,
# and the script prints: server peak RSS (largest VmHWM of any server process), valid
# uploads acknowledged vs stored, acknowledged crashes missing (lost), keys stored or
# answered twice (duplicates), crashes not done, staging files and orphan blobs left.
# Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-1800}"
CLIENTS="${CLIENTS:-64}"
KILL_EVERY="${KILL_EVERY:-180}"
PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432}"
BIN="${POSTMORTEM_BIN:-${CARGO_TARGET_DIR:-target}/release/postmortem}"
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release -p postmortem" >&2; exit 1; }
for tool in gcc curl jq python3 psql; do
    command -v "$tool" >/dev/null || { echo "soak: $tool is required" >&2; exit 1; }
done

WORK="$(mktemp -d -t pm-soak-XXXXXX)"
DATA="$WORK/data"
PG_DB="pm_soak_$$_$(date +%s)"
DB_URL="$PG_URL/$PG_DB"
SERVER_PID=""
WORKER_PID=""
SAMPLER_PID=""
CLIENT_PIDS=()
cleanup() {
    for p in "${CLIENT_PIDS[@]}" $SAMPLER_PID $SERVER_PID $WORKER_PID; do
        kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    psql "$PG_URL/postgres" -qc "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null 2>&1 || true
    [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

# A real core: a program that dies in a comparator called by qsort.
mkdir -p "$WORK/core"
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
gcc -g -O0 -Wl,--build-id -o "$WORK/prog" "$WORK/prog.c"
(cd "$WORK/core" && ulimit -c unlimited && { "$WORK/prog" || true; }) 2>/dev/null
CORE="$(ls "$WORK"/core/core* 2>/dev/null | head -n 1)"
[ -f "$CORE" ] || { echo "soak: no core written (core_pattern?)" >&2; exit 1; }
head -c 4096 /dev/urandom >"$WORK/garbage"
# Over the 8 MiB wire limit the server runs with: a valid header, then zeros.
{ cat "$CORE"; head -c $((10 << 20)) /dev/zero; } >"$WORK/big"
# Under it: 4 MiB more, which a client at 256 KiB/s gives up on after 1 s.
{ cat "$CORE"; head -c $((4 << 20)) /dev/zero; } >"$WORK/mid"

psql "$PG_URL/postgres" -qc "CREATE DATABASE $PG_DB" >/dev/null
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT"
STORAGE=(--data-dir "$DATA" --database-url "$DB_URL")

# The largest VmHWM of any server process, sampled until it is killed.
echo 0 >"$WORK/peak_kib"
note_peak() {
    local pid="$1" kib
    kib="$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status" 2>/dev/null || true)"
    [ -n "$kib" ] && [ "$kib" -gt "$(cat "$WORK/peak_kib")" ] && echo "$kib" >"$WORK/peak_kib"
    return 0
}
start_server() { # extra args...
    "$BIN" serve --listen "127.0.0.1:$PORT" "${STORAGE[@]}" --workers 1 --max-body-mb 8 \
        --body-idle-timeout-secs 5 "$@" >>"$WORK/server.out" 2>>"$WORK/server.err" &
    SERVER_PID=$!
    for _ in $(seq 200); do
        curl -sf -m 1 -o /dev/null "$BASE/healthz" && return 0
        sleep 0.1
    done
    echo "soak: the server did not start:" >&2; tail "$WORK/server.err" >&2; exit 1
}
start_worker() {
    "$BIN" worker "${STORAGE[@]}" --workers 2 >>"$WORK/worker.out" 2>>"$WORK/worker.err" &
    WORKER_PID=$!
}

# One client: uploads until the deadline. Writes "key id" per acknowledged valid upload
# (one line per answer, so a key answered with two ids shows), "key -" when it gave up.
client() { # n deadline
    local n="$1" deadline="$2" i=0 kind key code id try
    local acks="$WORK/acks.$n" codes="$WORK/codes.$n" body="$WORK/body.$n"
    : >"$acks"; : >"$codes"
    while [ "$(date +%s)" -lt "$deadline" ]; do
        i=$((i + 1))
        kind=$(((n + i) % 8))
        case "$kind" in
        0 | 1 | 2 | 3 | 4) # valid, retried with its key until answered; kind 4 is slow
            key="soak-$n-$i-$RANDOM$RANDOM"
            local rate=()
            [ "$kind" = 4 ] && rate=(--limit-rate 64k)
            id="-"
            for try in $(seq 20); do
                code="$(curl -s -m 30 "${rate[@]}" -o "$body" -w '%{http_code}' \
                    -H "Idempotency-Key: $key" --data-binary "@$CORE" \
                    "$BASE/api/v1/crashes" || true)"
                echo "valid $code" >>"$codes"
                if [ "$code" = 200 ] || [ "$code" = 202 ]; then
                    id="$(jq -r '.id // empty' "$body" 2>/dev/null || true)"
                    [ -n "$id" ] && { echo "$key $id" >>"$acks"; break; }
                fi
                id="-"
                sleep 0.5
            done
            [ "$id" = "-" ] && echo "$key -" >>"$acks"
            ;;
        5) # garbage
            code="$(curl -s -m 10 -o /dev/null -w '%{http_code}' --data-binary "@$WORK/garbage" \
                "$BASE/api/v1/crashes" || true)"
            echo "garbage $code" >>"$codes"
            ;;
        6) # cut off mid-body: the client gives up after 1 s at 256 KiB/s
            code="$(curl -s -m 1 --limit-rate 256k -o /dev/null -w '%{http_code}' \
                -H "Idempotency-Key: cut-$n-$i" --data-binary "@$WORK/mid" \
                "$BASE/api/v1/crashes" || true)"
            echo "cut $code" >>"$codes"
            ;;
        7) # over the wire limit
            code="$(curl -s -m 30 -o /dev/null -w '%{http_code}' --data-binary "@$WORK/big" \
                "$BASE/api/v1/crashes" || true)"
            echo "big $code" >>"$codes"
            ;;
        esac
    done
}

echo "postmortem soak: $(nproc) cores, ${DURATION}s, $CLIENTS clients, SIGKILL every ${KILL_EVERY}s, core $(stat -c %s "$CORE") bytes, $BIN"
start_server
start_worker
END=$(($(date +%s) + DURATION))
for n in $(seq "$CLIENTS"); do
    client "$n" "$END" &
    CLIENT_PIDS+=($!)
done
kills=0
next_kill=$(($(date +%s) + KILL_EVERY))
while [ "$(date +%s)" -lt "$END" ]; do
    note_peak "$SERVER_PID"
    if [ "$(date +%s)" -ge "$next_kill" ]; then
        kill -KILL "$SERVER_PID" "$WORKER_PID" 2>/dev/null || true
        wait "$SERVER_PID" "$WORKER_PID" 2>/dev/null || true
        kills=$((kills + 1))
        start_server
        start_worker
        next_kill=$(($(date +%s) + KILL_EVERY))
    fi
    sleep 0.5
done
for p in "${CLIENT_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
CLIENT_PIDS=()
note_peak "$SERVER_PID"

# Final: a last server whose sweep removes what is older than 2 s, and the queue drained.
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
start_server --sweep-interval-secs 1 --sweep-age-secs 2
for _ in $(seq 600); do
    left="$(psql "$DB_URL" -tAc "SELECT COUNT(*) FROM crashes WHERE status IN ('pending','processing')")"
    [ "$left" = 0 ] && break
    sleep 1
done
sleep 5
note_peak "$SERVER_PID"

q() { psql "$DB_URL" -tAc "$1"; }
cat "$WORK"/acks.* >"$WORK/acks"
acked_keys="$(awk '$2 != "-" {print $1}' "$WORK/acks" | sort -u | wc -l)"
gave_up="$(awk '$2 == "-"' "$WORK/acks" | wc -l)"
answered_twice="$(awk '$2 != "-" {print $1, $2}' "$WORK/acks" | sort -u | awk '{print $1}' | uniq -d | wc -l)"
q "SELECT idempotency_key || ' ' || id FROM crashes" | sort >"$WORK/stored"
awk '$2 != "-" {print $1 " " $2}' "$WORK/acks" | sort -u >"$WORK/acked"
lost="$(comm -23 "$WORK/acked" "$WORK/stored" | wc -l)"
stored="$(q "SELECT COUNT(*) FROM crashes")"
stored_twice="$(q "SELECT COUNT(*) FROM (SELECT idempotency_key FROM crashes GROUP BY idempotency_key HAVING COUNT(*) > 1) d")"
unkeyed="$(q "SELECT COUNT(*) FROM crashes WHERE idempotency_key IS NULL")"
not_done="$(q "SELECT status || ':' || COUNT(*) FROM crashes WHERE status <> 'done' GROUP BY status" | tr '\n' ' ')"
staging_left="$(find "$DATA/tmp" -type f 2>/dev/null | wc -l)"
q "SELECT dump_sha256 FROM crashes UNION SELECT sha256 FROM binaries" | sort -u >"$WORK/named"
find "$DATA/blobs" -type f -printf '%f\n' 2>/dev/null | sort -u >"$WORK/blobs"
orphans="$(comm -23 "$WORK/blobs" "$WORK/named" | wc -l)"
missing_blobs="$(comm -13 "$WORK/blobs" "$WORK/named" | wc -l)"

echo "requests by kind and status:"
cat "$WORK"/codes.* | sort | uniq -c | sort -k2,2 -k1,1nr | sed 's/^/  /'
echo "server SIGKILLs (with the worker): $kills"
echo "server peak RSS: $(($(cat "$WORK/peak_kib") / 1024)) MiB"
echo "valid uploads acknowledged: $acked_keys (gave up after 20 tries: $gave_up)"
echo "crashes stored: $stored (without a key: $unkeyed); not done: ${not_done:-none}"
echo "acknowledged but not stored (lost): $lost"
echo "duplicates: keys stored twice $stored_twice, keys answered with two ids $answered_twice"
echo "left after the final sweep: staging files $staging_left, orphan blobs $orphans; crashes whose blob is missing: $missing_blobs"
