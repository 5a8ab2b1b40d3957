#!/usr/bin/env bash
# The full CPU test suite on a fresh machine: installs dependencies, builds (CUDA targets are
# compiled when nvcc exists), runs every ctest test. GPU tests skip, saying why, without a GPU.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
"$repo/scripts/build.sh"
build="${REE_BUILD_DIR:-$repo/build}"
ctest --test-dir "$build" --output-on-failure -j "${REE_TEST_JOBS:-2}" -LE slow "$@"
