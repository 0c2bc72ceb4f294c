#!/usr/bin/env bash
# Runs the whole test suite of postmortem on a fresh Debian 12 machine (as root):
# installs what the tests need, then formatting, lints and every test.
# Honours CARGO_TARGET_DIR when it is set.
set -euo pipefail
cd "$(dirname "$0")"

# Each section's duration is printed when it ends, and all of them with the total when the
# script exits (also when a section fails: the list then ends with the failed one).
suite_start=$SECONDS
section_name=""
section_start=$SECONDS
durations=()
end_section() {
    [ -n "$section_name" ] || return 0
    local took=$((SECONDS - section_start))
    durations+=("$(printf '%6d s  %s' "$took" "$section_name")")
    printf -- '---- %s: %d s\n' "$section_name" "$took"
    section_name=""
}
section() {
    end_section
    section_name="$*"
    section_start=$SECONDS
    printf '\n==== %s ====\n' "$*"
}
print_durations() {
    local status=$?
    local failed="$section_name"
    end_section
    printf '\n==== Durations ====\n'
    printf '%s\n' "${durations[@]}"
    printf '%6d s  total' "$((SECONDS - suite_start))"
    if [ "$status" -ne 0 ]; then printf ' (failed in: %s)' "${failed:-set-up}"; fi
    printf '\n'
}
trap print_durations EXIT

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "test.sh: not root and no sudo: cannot install packages" >&2; exit 1
    fi
fi

section "System packages"
# gdb and libc6-dbg: the reference debugger and libc's debug info (so libc frames have
# names on both sides); compilers for the crash programs compiled at test time; the
# aarch64 cross compiler, QEMU user-mode and gdb-multiarch for the aarch64 comparison
# (Debian has no debug package for the cross libc: its frames are named from .dynsym);
# headless Chromium for the dashboard test (server/tests/dashboard.rs); elfutils'
# debuginfod-find, a client of the server's debuginfod routes (server/tests/debuginfod.rs),
# and its debuginfod server, a remote symbol source of `postmortem walk`
# (server/tests/sources.rs); mingw-w64 and wine for the Windows x64 minidumps
# (server/tests/windows_minidump.rs: crash programs cross-compiled with
# x86_64-w64-mingw32-gcc, run under wine, whose dbghelp writes the minidump and whose
# winedbg is the reference backtrace). Without recommends wine still runs console
# programs, dbghelp and winedbg (its Depends carry the loader, the PE DLLs and
# wineserver; the recommends are fonts, codecs and graphics drivers).
export DEBIAN_FRONTEND=noninteractive
# gcc-12-multilib and g++-12-multilib: `gcc -m32` for the i386 comparison with gdb
# (server/tests/gdb_compare/i386.rs). Not the gcc-multilib metapackage: Debian has it
# conflict with gcc-aarch64-linux-gnu, and installing it removes the cross compilers.
# gcc-arm-linux-gnueabihf and g++-arm-linux-gnueabihf: the armhf cross compilers (C++ for
# the uncaught-exception cases; the libc under
# /usr/arm-linux-gnueabihf) for the 32-bit arm comparison with gdb-multiarch under
# qemu-arm-static (server/tests/gdb_compare/arm.rs).
# The suite is hermetic: a walk asks no remote source unless a test names one (a
# machine's profile may set DEBUGINFOD_URLS for gdb, which `postmortem walk` honours).
unset DEBUGINFOD_URLS
# Another apt run on the machine (an engineer installing a tool) holds dpkg's lock: wait
# for it, up to ten minutes, rather than fail the section at once (seen 2026-12-02).
APT_GET="apt-get -o DPkg::Lock::Timeout=600"
# A mirror that serves one index badly (seen here: bookworm-security's i386 index,
# truncated) fails the update, not the install: the lists already on the machine are used.
$SUDO $APT_GET update || echo "test.sh: apt-get update failed; installing from the package lists already here" >&2
$SUDO $APT_GET install -y --no-install-recommends \
    gdb libc6-dbg gcc g++ make clang lld llvm elfutils binutils python3 curl debuginfod \
    libc6-dev libstdc++-12-dev pkg-config ca-certificates chromium chromium-driver \
    gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static gdb-multiarch \
    wine wine64 gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64 gcab \
    gcc-12-multilib g++-12-multilib gcc-arm-linux-gnueabihf g++-arm-linux-gnueabihf

# The target's own aarch64 libc and its debug package (Debian's libc6:arm64 and
# libc6-dbg:arm64), unpacked into a folder of their own rather than installed: installed,
# their /lib/ld-linux-aarch64.so.1 and /lib/aarch64-linux-gnu would be found by QEMU and
# gdb ahead of the cross libc the other aarch64 cases run on. A QEMU core of a program run
# on them names libc by path only, and its debug file must still be found by the loaded
# file's build-id (gdb_compare: aarch64_qemu_core_on_the_targets_own_libc_…).
arm64_root="${POSTMORTEM_ARM64_ROOT:-/var/cache/postmortem-arm64-root}"
if [ ! -f "$arm64_root/.complete" ]; then
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $SUDO dpkg --add-architecture arm64
        $SUDO $APT_GET update
    fi
    debs="$(mktemp -d)"
    (cd "$debs" && apt-get download libc6:arm64 libc6-dbg:arm64)
    rm -rf "$arm64_root" && mkdir -p "$arm64_root"
    for deb in "$debs"/*.deb; do dpkg -x "$deb" "$arm64_root"; done
    rm -rf "$debs"
    touch "$arm64_root/.complete"
fi
export POSTMORTEM_ARM64_ROOT="$arm64_root"
echo "aarch64 multiarch libc in $arm64_root"

# 32-bit wine and mingw-w64's i686 compilers for the Windows x86 comparison with winedbg
# (server/tests/windows_x86_minidump.rs: programs built by i686-w64-mingw32-gcc, run in a
# WINEARCH=win32 prefix). wine32 is an i386 package: the architecture is added to dpkg
# once; installing it upgrades the amd64 halves of the multi-arch libraries to the i386
# halves' versions and removes nothing (checked with `apt-get install -s`).
if ! dpkg-query -W -f='${Status}' wine32:i386 2>/dev/null | grep -q 'ok installed' \
    || ! command -v i686-w64-mingw32-g++ >/dev/null 2>&1; then
    if ! dpkg --print-foreign-architectures | grep -qx i386; then
        $SUDO dpkg --add-architecture i386
        $SUDO $APT_GET update
    fi
    $SUDO $APT_GET install -y --no-install-recommends \
        wine32:i386 gcc-mingw-w64-i686 g++-mingw-w64-i686
fi

section "Python tools"
# schemathesis: the API is fuzzed against openapi.yaml (server/tests/service.rs).
if ! command -v schemathesis >/dev/null 2>&1; then
    python3 -m pip install --quiet schemathesis
fi
schemathesis --version
# moto_server: an S3-compatible server for the S3 blob store test (server/tests/blobs_s3.rs)
# and the symbol buckets (server/tests/sources.rs, sources/tests/symsrv_cab.rs).
if ! command -v moto_server >/dev/null 2>&1; then
    python3 -m pip install --quiet 'moto[server]'
fi
python3 -m pip show moto | sed -n 's/^Version: /moto /p'

section "Core dumps"
# The gdb comparison tests crash programs and read the core the kernel writes into the
# working directory, so core_pattern must be a plain file name.
pattern="$(cat /proc/sys/kernel/core_pattern)"
case "$pattern" in
    core*) echo "core_pattern: $pattern" ;;
    *)
        echo "core_pattern is '$pattern'; setting it to 'core'"
        if ! echo core | $SUDO tee /proc/sys/kernel/core_pattern >/dev/null; then
            echo "test.sh: cannot set /proc/sys/kernel/core_pattern; the gdb comparison tests will fail" >&2
        fi
        ;;
esac

section "Rust toolchain"
if ! command -v cargo >/dev/null 2>&1; then
    echo "test.sh: cargo is not installed (install Rust with rustup first)" >&2
    exit 1
fi
if command -v rustup >/dev/null 2>&1; then
    installed="$(rustup component list --installed)"
    for component in clippy rustfmt; do
        if ! grep -q "^$component" <<<"$installed"; then
            rustup component add "$component"
        fi
    done
fi
cargo --version
rustc --version
gdb --version | head -n 1

section "Reference tools"
# dump_syms writes the Breakpad .sym files the minidump tests walk with (idempotent:
# installed once, skipped when present).
if ! command -v dump_syms >/dev/null 2>&1; then
    cargo install --locked dump_syms
fi
dump_syms --version || true
# minidump-stackwalk (rust-minidump) is what `postmortem-walk --json` must agree with,
# field by field (server/tests/minidump_gdb/stackwalk.rs).
if ! command -v minidump-stackwalk >/dev/null 2>&1; then
    cargo install --locked minidump-stackwalk
fi
minidump-stackwalk --version

section "cargo fmt --check"
cargo fmt --all --check

section "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

section "cargo test"
cargo test --workspace

section "postmortem-walk linked statically"
# The walk-only binary ships linked statically (docker/Dockerfile, README): built so
# here, it must give the same reports (the minidump test that runs postmortem-walk, again
# with this build).
cargo rustc -p postmortem-cli --bin postmortem-walk -- -C target-feature=+crt-static
static_dir="$(mktemp -d)"
cp "${CARGO_TARGET_DIR:-target}/debug/postmortem-walk" "$static_dir/"
if ldd "$static_dir/postmortem-walk" 2>&1 | grep -q '=>'; then
    echo "test.sh: postmortem-walk built with +crt-static still loads shared libraries" >&2
    exit 1
fi
POSTMORTEM_WALK_BIN="$static_dir/postmortem-walk" \
    cargo test -p postmortem --test suite -- --exact minidump_gdb::indexed_sym_files_give_the_whole_tables_report
rm -rf "$static_dir"

section "The README's first command"
# `cargo run --release -- serve`, read from README.md and run as written, then the README's
# curl lines upload a crashed program and its core and the report is checked.
scripts/readme-serve.sh

section "The release binary ships without its debug information"
# The README's first command built target/release/postmortem: its debug information is
# split off into postmortem.dwp, and split-debuginfo.sh (as docker/Dockerfile runs it)
# leaves code and symbol table, within the sizes docs/performance.md measured.
scripts/check-release-binary.sh

section "docker/Dockerfile copies the whole workspace"
scripts/check-dockerfile.sh

section "The README is a front door; the docs' links resolve"
# At most 200 lines (issue 36), and no relative link in README.md or docs/ leads nowhere.
scripts/check-docs.sh

section "Nothing reads outside the repository"
# A user's clone has nothing beside it: every fixture and document lives in the repository.
# Only .ci/run may point the corpus tests at the dumps other projects wrote, which are never
# committed (cli/tests/corpus.rs reads them through POSTMORTEM_CORPUS, and says when skipped).
if git grep -nE '\.\./(\.\./)*shared/' -- ':!*.lock' ':!test.sh' ':!.ci/run'; then
    echo "test.sh: the files above read a shared folder beside the clone, which a clone does not have" >&2
    exit 1
fi

section "The engine stays pure"
# The engine takes bytes and returns values: no async runtime, database, object store or
# HTTP may enter its dependency tree (the fuzz crate builds on it too). postmortem-walk,
# the walk-only program, links the engine and a blocking HTTP client for debuginfod
# (ureq): never an async runtime, database or object store.
async_or_store='tokio|sqlx|object_store|hyper|axum|reqwest|moka|postmortem-worker'
for check in "postmortem-engine:$async_or_store|ureq|rustls" "postmortem-cli:$async_or_store"; do
    pkg="${check%%:*}"
    if cargo tree -p "$pkg" -e normal,build --prefix none | grep -E "^(${check#*:}) "; then
        echo "test.sh: the crates above entered $pkg's dependency tree" >&2
        exit 1
    fi
done

section "fuzz targets compile"
# The cargo-fuzz crate has its own workspace; checking it keeps every target building
# (run one with: cd engine/fuzz && cargo +nightly fuzz run elf_core).
cargo check --manifest-path engine/fuzz/Cargo.toml --bins

section "All tests passed"
