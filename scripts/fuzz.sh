#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, -DREE_FUZZ=ON: clang, ASan + UBSan, CPU only) and runs
# each one: first every input of its seed corpus once (a regression check), then fuzzing for a
# bounded time, or for a fixed number of inputs from a fixed seed. Fails on any crash, leak,
# timeout or out-of-memory, leaving the reproducer under the output folder. docs/development.md
# ("Fuzzing") says more.
#
#   scripts/fuzz.sh                     all targets, FUZZ_SECONDS each
#   scripts/fuzz.sh receipt json_guard  some targets (names without the fuzz_ prefix)
#
# Environment: FUZZ_SECONDS (default 30) per target; or FUZZ_RUNS inputs per target from the seed
# FUZZ_SEED (default 1), starting from the seed corpus alone: a bounded run (scripts/test.sh, CI),
# not an identical one (below), and a failure leaves its input to replay; FUZZ_JOBS targets at a
# time (default: the number of cores); REE_FUZZ_BUILD_DIR (default <repo>/build-fuzz); FUZZ_OUT for
# the logs, new inputs and reproducers (default <build>/fuzz-out); CC/CXX (default clang-14 and
# clang++-14).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${REE_FUZZ_BUILD_DIR:-$repo/build-fuzz}"
out="${FUZZ_OUT:-$build/fuzz-out}"
seconds="${FUZZ_SECONDS:-30}"
runs="${FUZZ_RUNS:-}"
jobs="${FUZZ_JOBS:-$(nproc)}"
fuzz_dir="$repo/tests/fuzz"

cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREE_FUZZ=ON \
  -DCMAKE_C_COMPILER="${CC:-clang-14}" -DCMAKE_CXX_COMPILER="${CXX:-clang++-14}" \
  -DREE_CUDA=OFF -DREE_MPI=OFF -DREE_TORCH=OFF -DREE_BUILD_TESTS=OFF -DREE_BUILD_BENCH=OFF \
  >/dev/null
cmake --build "$build" --parallel "${REE_JOBS:-$(nproc)}" --target ree_fuzz_targets

targets=("$@")
if ((${#targets[@]} == 0)); then
  for source in "$fuzz_dir"/fuzz_*.cpp; do
    name="$(basename "$source" .cpp)"
    # fuzz_onnx needs the ONNX compiler (protobuf, onnx.proto); a build without it lacks the target.
    [ "$name" = fuzz_onnx ] && [ ! -x "$build/tests/fuzz/$name" ] && continue
    targets+=("${name#fuzz_}")
  done
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$out"

# One target: the corpus once, then FUZZ_SECONDS of fuzzing (or FUZZ_RUNS inputs). Writes
# <out>/<target>/{regression,fuzz}.log and the libFuzzer artifacts (crash-*, leak-*, timeout-*,
# oom-*) beside them; new inputs go to <out>/<target>/corpus and are kept for the next timed run
# (the seed corpus in the tree is only read; a FUZZ_RUNS run starts from it alone).
run_target() {
  local target="$1"
  local binary="$build/tests/fuzz/fuzz_$target" seeds="$fuzz_dir/corpus/$target"
  local work="$out/$target"
  mkdir -p "$work/corpus"
  rm -f "$work"/{failed,regression.log,fuzz.log} "$work"/{crash,leak,timeout,oom,slow-unit}-*
  local dict=()
  if [ -f "$fuzz_dir/dict/$target.dict" ]; then
    cat "$fuzz_dir/dict/json.dict" "$fuzz_dir/dict/$target.dict" >"$work/$target.dict"
    dict=("-dict=$work/$target.dict")
  elif [ "$target" != tokenizer_encode ]; then
    dict=("-dict=$fuzz_dir/dict/json.dict")
  fi
  local common=(-rss_limit_mb=2048 -timeout=10 "-artifact_prefix=$work/")
  if ! "$binary" "${common[@]}" -runs=0 "$seeds" >"$work/regression.log" 2>&1; then
    echo "regression" >"$work/failed"
    return
  fi
  local budget=(-max_total_time="$seconds") limit=$((seconds + 120)) corpus="$work/corpus"
  local inputs=("$corpus" "$seeds")
  if [ -n "$runs" ]; then
    budget=(-runs="$runs" -seed="${FUZZ_SEED:-1}")
    limit=$((runs / 100 + 300))
    corpus="$work/corpus-runs"
    rm -rf "$corpus" && mkdir -p "$corpus"
    # The seeds as a list sorted by name, not as a folder: libFuzzer keeps the order in which it
    # reads its inputs among those of equal size, and a folder's order is the file system's (ext4
    # hashes names with a per-disk seed), so the same seed started from other inputs elsewhere.
    # Runs still differ a little after that (two runs of one binary added 1,679 and 1,640 inputs
    # to chat_template's corpus; with ASLR off, 797 and 814 in 30,000): a crash one machine finds,
    # another may not, which is why new parsers get long local runs and findings become seeds.
    find "$seeds" -maxdepth 1 -type f | LC_ALL=C sort | paste -sd, >"$work/seeds.list"
    inputs=("$corpus" "-seed_inputs=@$work/seeds.list")
  fi
  if ! timeout "$limit" "$binary" "${common[@]}" "${dict[@]}" "${budget[@]}" -print_final_stats=1 \
    "${inputs[@]}" >"$work/fuzz.log" 2>&1; then
    echo "fuzz" >"$work/failed"
  fi
}

running=0
for target in "${targets[@]}"; do
  if [ ! -x "$build/tests/fuzz/fuzz_$target" ]; then
    echo "fuzz: no target fuzz_$target (have: $(cd "$build/tests/fuzz" && ls fuzz_* | tr '\n' ' '))" >&2
    exit 2
  fi
  run_target "$target" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

# Summary from libFuzzer's final stats.
stat() { sed -n "s/^stat::$1: *//p" "$2" 2>/dev/null | tail -1; }
failures=0
printf '%-18s %9s %11s %9s %9s %7s  %s\n' target execs/s executions new_units slowest_s rss_mb \
  result
for target in "${targets[@]}"; do
  work="$out/$target"
  log="$work/fuzz.log"
  result=ok
  if [ -f "$work/failed" ]; then
    result="FAILED: $work/$(cat "$work/failed").log"
    failures=$((failures + 1))
  fi
  printf '%-18s %9s %11s %9s %9s %7s  %s\n' "$target" "$(stat average_exec_per_sec "$log")" \
    "$(stat number_of_executed_units "$log")" "$(stat new_units_added "$log")" \
    "$(stat slowest_unit_time_sec "$log")" "$(stat peak_rss_mb "$log")" "$result"
done
if ((failures > 0)); then
  for target in "${targets[@]}"; do
    work="$out/$target"
    [ -f "$work/failed" ] || continue
    log="$work/$(cat "$work/failed").log"
    echo "---- $target: $(cat "$work/failed") failed; last lines of $log:" >&2
    grep -E "ERROR|SUMMARY|violated|Test unit written|#[0-9]+ 0x" "$log" | head -40 >&2 || tail -40 "$log" >&2
    ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | sed 's/^/reproducer: /' >&2 || true
  done
  echo "fuzz: $failures target(s) failed; reproduce with $build/tests/fuzz/fuzz_TARGET FILE" >&2
  exit 1
fi
if [ -n "$runs" ]; then
  echo "fuzz: ${#targets[@]} target(s), $runs inputs each (seed ${FUZZ_SEED:-1}), no crash, leak or timeout"
else
  echo "fuzz: ${#targets[@]} target(s), ${seconds} s each, no crash, leak or timeout"
fi
