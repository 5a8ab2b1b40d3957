#!/usr/bin/env bash
# ctest driver: install the build tree into a temporary prefix, configure and build
# tests/package against it with find_package(ree), run the consumer on the built-in model.
set -euo pipefail
build="$1"
source_dir="$2"
work="$3"
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/tests/package" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
REE_CACHE_DIR="$work/cache" LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" \
  "$work/consumer/consumer" builtin:tiny-llama "Hello"
