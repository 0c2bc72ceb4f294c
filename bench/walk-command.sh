# Sourced by the walk benches: sets PM, the walk command timed, from the environment —
# POSTMORTEM_WALK_BIN (a `postmortem-walk`), else POSTMORTEM_BIN (`postmortem walk`),
# else `postmortem walk` built here (release, under CARGO_TARGET_DIR or target/) — after
# checking that every tool named in NEEDS is installed.
for tool in $NEEDS; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
if [ -n "${POSTMORTEM_WALK_BIN:-}" ]; then
    PM="$(realpath "$POSTMORTEM_WALK_BIN")"
else
    if [ -z "${POSTMORTEM_BIN:-}" ]; then
        cargo build --release -p postmortem >&2
        POSTMORTEM_BIN="${CARGO_TARGET_DIR:-target}/release/postmortem"
    fi
    PM="$(realpath "$POSTMORTEM_BIN") walk"
fi
