#!/usr/bin/env bash
# Configures and builds REE into ${REE_BUILD_DIR:-<repo>/build}. Extra arguments go to cmake.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${REE_BUILD_DIR:-$repo/build}"
venv="${REE_VENV:-$repo/.venv}"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${REE_BUILD_TYPE:-Release}" \
  -DREE_PYTHON="$venv/bin/python" "$@"
cmake --build "$build" --parallel "${REE_JOBS:-$(nproc)}"
