#!/usr/bin/env bash
# Throughput of `postmortem upload` for one large debug file, and its resume when the
# connection is cut in the middle (docs/upload.md, "Measured").
#
# Usage: bench/upload-resume.sh [CUT_MB]     (default: half the file's compressed size)
# Environment:
#   POSTMORTEM_BIN  the binary (default: target/debug/postmortem under CARGO_TARGET_DIR,
#                   built by this script); it is also the debug file's source
#   DEBUG_FILE      the file to upload (default: `objcopy --only-keep-debug` of
#                   POSTMORTEM_BIN, a real DWARF file of a few hundred MB)
#   OUT             work directory (default: a new temporary directory, removed at the end)
# Needs: objcopy (binutils), python3, curl, GNU time (/usr/bin/time).
#
# Steps: two `postmortem serve --workers 0 --token t:symbols` on free ports, each with a
# fresh data dir. 1) the file is uploaded to the first under /usr/bin/time -v: wall time,
# client max RSS, and the server's `received_bytes` (GET /api/v1/upload-sessions), which is
# the compressed size C. 2) the same file to the second through a TCP proxy (python3, below)
# that closes both ends of the connection once, after CUT_MB of request bytes: the client
# sees the reset, asks the session's offset and sends the rest. The second server's
# `received_bytes` must equal C (no byte received twice); the proxy prints what it
# forwarded before and after the cut.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${CARGO_TARGET_DIR:-target}"
for tool in objcopy python3 curl /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
if [ -z "${POSTMORTEM_BIN:-}" ]; then
    cargo build -p postmortem >&2
    POSTMORTEM_BIN="$TARGET/debug/postmortem"
fi
POSTMORTEM_BIN="$(realpath "$POSTMORTEM_BIN")"
if [ -z "${OUT:-}" ]; then
    OUT="$(mktemp -d -t pm-upresume-XXXXXX)"
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT
else
    trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
fi
mkdir -p "$OUT"
if [ -z "${DEBUG_FILE:-}" ]; then
    DEBUG_FILE="$OUT/postmortem.debug"
    objcopy --only-keep-debug "$POSTMORTEM_BIN" "$DEBUG_FILE"
fi
SIZE=$(stat -c %s "$DEBUG_FILE")
echo "file: $DEBUG_FILE, $SIZE bytes"

serve() { # serve NAME: starts a server, prints its base URL
    "$POSTMORTEM_BIN" serve --listen 127.0.0.1:0 --data-dir "$OUT/$1" --workers 0 \
        --token t:symbols > "$OUT/$1.out" 2>&1 &
    for _ in $(seq 300); do
        grep -q '^postmortem listening on ' "$OUT/$1.out" 2>/dev/null && break
        sleep 0.1
    done
    sed -n 's/^postmortem listening on //p' "$OUT/$1.out"
}
received() { # received BASE: the server's received_bytes
    curl -sS -H 'Authorization: Bearer t' "$1/api/v1/upload-sessions" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["received_bytes"])'
}
upload() { # upload NAME BASE: one timed upload, its output in NAME.upload
    /usr/bin/time -v -o "$OUT/$1.time" "$POSTMORTEM_BIN" upload --url "$2" --token t \
        "$DEBUG_FILE" > "$OUT/$1.upload" 2>&1
    cat "$OUT/$1.upload"
    grep -E 'Elapsed \(wall clock\)|Maximum resident' "$OUT/$1.time"
}

# 1. uncut
A=$(serve a)
upload whole "$A"
C=$(received "$A")
echo "server a received_bytes: $C (the compressed size)"

# 2. cut once after CUT_MB, through the proxy
CUT_MB="${1:-$((C / 2 / 1048576))}"
B=$(serve b)
PORT_B="${B##*:}"
cat > "$OUT/proxy.py" <<'EOF'
# A TCP proxy that closes both ends of the connection carrying the request byte number
# CUT (once), and counts what it forwards to the server before and after the cut.
import socket, sys, threading
listen_port, upstream_port, cut = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
state = {"sent": 0, "cut": False, "after": 0}
lock = threading.Lock()
def pump(src, dst, upward):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if upward:
                with lock:
                    if not state["cut"] and state["sent"] + len(data) >= cut:
                        keep = cut - state["sent"]
                        dst.sendall(data[:keep])
                        state["sent"] += keep
                        state["cut"] = True
                        print(f"cut after {state['sent']} request bytes", flush=True)
                        for s in (src, dst):
                            s.shutdown(socket.SHUT_RDWR)
                        return
                    if state["cut"]:
                        state["after"] += len(data)
                    else:
                        state["sent"] += len(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve():
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", listen_port))
    l.listen(16)
    print("ready", flush=True)
    while True:
        c, _ = l.accept()
        u = socket.create_connection(("127.0.0.1", upstream_port))
        threading.Thread(target=pump, args=(c, u, True), daemon=True).start()
        threading.Thread(target=pump, args=(u, c, False), daemon=True).start()
def report(*_):
    print(f"forwarded {state['sent']} request bytes before the cut, {state['after']} after", flush=True)
    sys.exit(0)
import signal
signal.signal(signal.SIGTERM, report)
serve()
EOF
PROXY_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -u "$OUT/proxy.py" "$PROXY_PORT" "$PORT_B" "$((CUT_MB * 1048576))" > "$OUT/proxy.out" 2>&1 &
PROXY_PID=$!
for _ in $(seq 100); do grep -q ready "$OUT/proxy.out" && break; sleep 0.1; done
upload cut "http://127.0.0.1:$PROXY_PORT"
kill -TERM "$PROXY_PID"
wait "$PROXY_PID" 2>/dev/null || true
cat "$OUT/proxy.out"
R=$(received "$B")
echo "server b received_bytes: $R (uncut: $C)"
[ "$R" = "$C" ] || { echo "FAIL: bytes received twice or lost" >&2; exit 1; }
echo "OK: the cut upload resumed; the server received each of the $C compressed bytes once"
