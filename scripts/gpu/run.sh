#!/usr/bin/env bash
# Run ON A GPU MACHINE from the repository root (bundle with scripts/gpu/bundle-deps.sh first and
# carry .deps). Unpacks the bundled Debian packages into a private prefix, builds REE with that
# machine's CUDA, NCCL, Open MPI and LibTorch (the torch wheel of its python3), runs the GPU and
# MPI tests (and the CPU tests, which are quick there), then the GPU benchmarks.
#
#   scripts/gpu/run.sh [--out DIR] [--tests REGEX] [--no-tests] [--no-bench] [--bench REGEX]
#                      [--arch LIST] [--target NAMES]  (--target: build only these, comma-separated)
#
# Logs go to --out, else $REE_GPU_OUT, else $OUT (the device tool's folder), else <repo>/out/gpu.
# REE_GPU_CMAKE_ARGS adds configure options (e.g. -DREE_COMPILER=OFF).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${REE_GPU_OUT:-${OUT:-$repo/out/gpu}}"
tests_regex=""
bench_regex="."
run_bench=1
run_tests=1
target=""
arch="90-real"
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --tests) tests_regex="$2"; shift 2 ;;
    --bench) bench_regex="$2"; shift 2 ;;
    --no-bench) run_bench=0; shift ;;
    --no-tests) run_tests=0; shift ;;
    --target) target="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    *) echo "gpu/run.sh: unknown argument '$1' (see the header of this script)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

# shellcheck source=scripts/gpu/deps-env.sh
source "$repo/scripts/gpu/deps-env.sh" || exit 2

python="${REE_PYTHON:-$(command -v python3)}"
{
  echo "== machine"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  nvcc --version | tail -n 2
  "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  echo "mpirun: $(command -v mpirun) $(mpirun --version 2>/dev/null | head -n 1)"
  nproc
} 2>&1 | tee "$out/machine.txt"

build="${REE_BUILD_DIR:-$repo/build-gpu}"
start=$(date +%s)
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREE_CUDA=ON -DREE_MPI=ON \
  -DREE_PYTHON="$python" -DCMAKE_CUDA_ARCHITECTURES="$arch" ${REE_GPU_CMAKE_ARGS:-} \
  >"$out/configure.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then tail -n 40 "$out/configure.log"; note "configure: FAILED"; exit $rc; fi
grep "REE:" "$out/configure.log" | tee -a "$summary"
targets=()
[ -n "$target" ] && IFS=, read -r -a names <<<"$target" && targets=(--target "${names[@]}")
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}" >"$out/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then grep -E "error|FAILED" "$out/build.log" | head -n 40; note "build: FAILED"; exit $rc; fi
note "build: ok in $(($(date +%s) - start)) s"

ctest_args=(--test-dir "$build" --verbose -j 4)
[ -n "$tests_regex" ] && ctest_args+=(-R "$tests_regex")
test_rc=0
if ((run_tests)); then
  ctest "${ctest_args[@]}" >"$out/ctest.log" 2>&1
  test_rc=$?
  grep -E "tests passed|tests failed|\*\*\*|Passed|Skipped|Failed" "$out/ctest.log" | tail -n 60 | tee -a "$summary"
fi

# Cross-hardware identity at the command line: the same job on the CPU and on GPU 0.
launch="$build/launcher/ree-launch"
if [ -x "$launch" ]; then
  note "== ree-launch identity: builtin:tiny-llama, reproducible, CPU vs cuda:0"
  export REE_CACHE_DIR="${REE_CACHE_DIR:-/tmp/ree-cache}"
  for dev in --cpu-only "--device cuda:0"; do
    # shellcheck disable=SC2086
    "$launch" --model builtin:tiny-llama --prompt-text "Reproducible inference means" \
      --max-new-tokens 64 --json $dev 2>>"$out/identity.log" | tee -a "$out/identity.log" |
      sed -E 's/.*"device":"([^"]+)".*"output_ids_sha256":"([0-9a-f]+)".*/\1 output_ids_sha256=\2/' |
      tee -a "$summary"
  done
fi

if ((run_bench)); then
  for bench in "$build"/bench/bench_gpu_*; do
    [ -x "$bench" ] || continue
    name="$(basename "$bench")"
    [[ "$name" =~ $bench_regex ]] || continue
    note "== $name"
    timeout "${REE_BENCH_TIMEOUT:-300}" "$bench" >"$out/$name.log" 2>&1 || note "$name exited with $?"
    tail -n 30 "$out/$name.log" | tee -a "$summary"
  done
fi
exit $test_rc
