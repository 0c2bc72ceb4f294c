#!/usr/bin/env bash
# Peak memory of `postmortem serve` receiving large uploads: uploads are streamed to a
# staging file under the data dir and copied into the blob store in bounded pieces, so
# the server's peak RSS should not grow with the upload's size.
#
# Usage: bench/upload-memory.sh [SIZE_MB]       (default 1024)
# Environment:
#   POSTMORTEM_BIN  the binary (default: target/release/postmortem under CARGO_TARGET_DIR,
#                   built by this script)
#   OUT             work directory (default: a new temporary directory, removed at the end)
# Needs: gcc, objcopy (binutils), curl, GNU time (/usr/bin/time), and SIZE_MB × 3 of free
# disk (the file, the staging copy, the stored blob).
#
# Steps: compile a small C program with a build-id and pad it into a SIZE_MB ELF executable
# (objcopy adds a SIZE_MB section of random bytes: the file is a real binary, identified by
# its headers); run `serve --workers 0` under /usr/bin/time -v; upload the file with curl
# (streamed from disk: `-T`), raw then as one multipart file, each time as new content;
# stop the server and print its peak RSS beside the upload size.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MB="${1:-1024}"
TARGET="${CARGO_TARGET_DIR:-target}"
for tool in gcc objcopy curl /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
if [ -z "${POSTMORTEM_BIN:-}" ]; then
    cargo build --release -p postmortem >&2
    POSTMORTEM_BIN="$TARGET/release/postmortem"
fi
POSTMORTEM_BIN="$(realpath "$POSTMORTEM_BIN")"

if [ -z "${OUT:-}" ]; then
    OUT="$(mktemp -d -t pm-upmem-XXXXXX)"
    trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"

cat > "$OUT/prog.c" <<'EOF'
int main(void) { return 0; }
EOF
gcc -O1 -Wl,--build-id -o "$OUT/prog" "$OUT/prog.c"
# Two different paddings: two different blobs, so neither upload is a no-op duplicate.
for i in 1 2; do
    head -c "$((SIZE_MB << 20))" /dev/urandom > "$OUT/pad"
    objcopy --add-section ".pad=$OUT/pad" --set-section-flags .pad=readonly,data \
        "$OUT/prog" "$OUT/big$i"
done
rm -f "$OUT/pad"
SIZE=$(stat -c %s "$OUT/big1")

LIMIT_MB=$((SIZE_MB + 64))
"/usr/bin/time" -v -o "$OUT/time.txt" "$POSTMORTEM_BIN" serve --listen 127.0.0.1:0 \
    --data-dir "$OUT/data" --workers 0 \
    --max-body-mb "$LIMIT_MB" --max-decompressed-mb "$LIMIT_MB" > "$OUT/serve.out" 2>&1 &
TIME_PID=$!
for _ in $(seq 100); do
    grep -q '^postmortem listening on ' "$OUT/serve.out" 2>/dev/null && break
    sleep 0.1
done
BASE=$(sed -n 's/^postmortem listening on //p' "$OUT/serve.out")
[ -n "$BASE" ] || { cat "$OUT/serve.out" >&2; exit 1; }

upload() {
    local what=$1
    shift
    local start end code
    start=$(date +%s.%N)
    code=$(curl -sS -o "$OUT/answer.json" -w '%{http_code}' "$@")
    end=$(date +%s.%N)
    [ "$code" = 201 ] || { echo "$what: HTTP $code: $(cat "$OUT/answer.json")" >&2; exit 1; }
    printf '%-22s %s MiB in %.1f s\n' "$what" "$((SIZE >> 20))" "$(echo "$end - $start" | bc)"
}
upload "raw binary upload" -X POST -T "$OUT/big1" -H 'Content-Type: application/octet-stream' \
    "$BASE/api/v1/binaries"
upload "multipart upload" -F "file=@$OUT/big2;type=application/octet-stream" \
    "$BASE/api/v1/binaries"

# The server's PID is the child of time.
SERVE_PID=$(pgrep -P "$TIME_PID" || true)
[ -n "$SERVE_PID" ] && kill -TERM "$SERVE_PID"
wait "$TIME_PID" || true
PEAK_KIB=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$OUT/time.txt")
echo "upload size: $((SIZE >> 20)) MiB each; serve peak RSS: $((PEAK_KIB / 1024)) MiB"
