#!/usr/bin/env bash
# ctest driver: install the build tree into a temporary prefix, configure and build
# tests/package against it with find_package(ree), run the consumer on the built-in model.
# Each step's output is kept in $work/*.log and printed when the step fails.
set -uo pipefail
build="$1"
source_dir="$2"
work="$3"
rm -rf "$work"
mkdir -p "$work"
step() {
  local name="$1"
  shift
  if ! "$@" >"$work/$name.log" 2>&1; then
    echo "package test: step '$name' failed: $*"
    cat "$work/$name.log"
    exit 1
  fi
}
step install cmake --install "$build" --prefix "$work/prefix"
step configure cmake -S "$source_dir/tests/package" -B "$work/consumer" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix"
step build cmake --build "$work/consumer"
REE_CACHE_DIR="$work/cache" "$work/consumer/consumer" builtin:tiny-llama "Hello"
