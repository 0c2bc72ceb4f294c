#!/usr/bin/env bash
# There is no Docker engine where the suite runs, so the image is not built here; what
# breaks it most often is checked instead: the build stage copies files one COPY at a
# time, and a workspace member it leaves out makes `cargo build` fail to load the
# workspace. This copies exactly what docker/Dockerfile's COPY lines name into an empty
# folder and asks cargo to load the workspace there (no build, nothing downloaded).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
# `COPY SRC... DEST` lines of the build stage (not `COPY --from=`).
while read -r _ args; do
    read -ra parts <<<"$args"
    dest="${parts[-1]}"
    unset 'parts[-1]'
    for src in "${parts[@]}"; do
        if [ "$dest" = "./" ]; then
            cp -r "$src" "$ctx/"
        else
            mkdir -p "$ctx/$(dirname "$dest")"
            cp -r "$src" "$ctx/$dest"
        fi
    done
done < <(grep -E '^COPY [^-]' docker/Dockerfile)
if ! (cd "$ctx" && cargo metadata --no-deps --format-version 1 >/dev/null); then
    echo "check-dockerfile: docker/Dockerfile's COPY lines leave out part of the workspace" >&2
    exit 1
fi
echo "docker/Dockerfile copies the whole workspace"
