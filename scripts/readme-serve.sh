#!/usr/bin/env bash
# Runs the README's first set-up command exactly as the README writes it (read from
# README.md, so the two cannot drift), in this clone as a new user would, then the
# README's own curl lines: upload a freshly crashed program's binary and core, read the
# report back and check its crashed stack. Only the data directory (POSTMORTEM_DATA_DIR)
# points into a scratch folder, so a developer's ./postmortem-data is left alone.
# Called by test.sh; needs gcc, curl and python3, and port 8080 free (the README's port).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# The first ```sh block after "## Set-up" is the serve command.
serve_cmd="$(awk '/^## Set-up/{s=1} s && /^```sh/{getline; print; exit}' README.md)"
[ "$serve_cmd" = "cargo run --release -- serve" ] || {
    echo "readme-serve: README's first command is '$serve_cmd'; update this check with it" >&2
    exit 1
}
# The README's upload lines, taken verbatim.
upload_bin="$(grep -m1 -F "curl --data-binary @./myapp -H 'X-File-Name: myapp'" README.md)"
upload_core="$(grep -m1 -F 'curl --data-binary @./core ' README.md)"
[ -n "$upload_bin" ] && [ -n "$upload_core" ] || {
    echo "readme-serve: the README no longer shows the binary and core upload lines" >&2
    exit 1
}

scratch="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then
        kill -TERM -- "-$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT

if curl -s -o /dev/null --max-time 2 http://127.0.0.1:8080/healthz; then
    echo "readme-serve: something already answers on 127.0.0.1:8080; stop it first" >&2
    exit 1
fi

# A crash program of the suite, as the README's `myapp`, and its core.
(
    cd "$scratch"
    gcc -g -O1 -o myapp "$root/server/tests/crashers/basic.c"
    ulimit -c unlimited
    # it dies of SIGSEGV on purpose; the inner shell's "Segmentation fault" line is noise
    sh -c './myapp' >/dev/null 2>&1 || true
    found="$(ls core core.* 2>/dev/null | head -n1 || true)"
    [ -n "$found" ] || { echo "readme-serve: the crash left no core file (core_pattern?)" >&2; exit 1; }
    [ "$found" = core ] || mv "$found" core
)

echo "readme-serve: $serve_cmd   (data in $scratch/data)"
POSTMORTEM_DATA_DIR="$scratch/data" setsid bash -c "$serve_cmd" >"$scratch/serve.log" 2>&1 &
server_pid=$!
# The first run builds the release binary: allow it time, but stop if the server dies.
for _ in $(seq 1 1800); do
    if curl -sf -o /dev/null --max-time 2 http://127.0.0.1:8080/healthz; then break; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "readme-serve: the server exited before answering /healthz:" >&2
        tail -n 30 "$scratch/serve.log" >&2
        exit 1
    fi
    sleep 1
done
curl -sf -o /dev/null http://127.0.0.1:8080/healthz || {
    echo "readme-serve: /healthz never answered" >&2; tail -n 30 "$scratch/serve.log" >&2; exit 1
}

cd "$scratch"
bash -c "$upload_bin" >binary.json
bash -c "$upload_core" >crash.json
id="$(python3 -c 'import json,sys; print(json.load(open("crash.json"))["id"])')"
curl -sf "http://127.0.0.1:8080/api/v1/crashes/$id" >report.json
python3 - <<'PY'
import json
crash = json.load(open("report.json"))
report = crash.get("report")
assert report, f"no report: {crash.get('status')} {crash.get('error')}"
thread = report["threads"][0]
assert thread["crashed"], "the crashed thread comes first"
names = [f["function"] for f in thread["frames"]]
want = ["crash_here", "middle", "outer", "main"]
assert names[: len(want)] == want, f"crashed stack {names}"
main_mod = [m for m in report["modules"] if m["main"]]
assert main_mod and main_mod[0]["status"] != "missing", f"the uploaded binary was not used: {main_mod}"
print("readme-serve: report ok:", " <- ".join(n or "??" for n in names))
PY
