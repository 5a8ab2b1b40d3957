#!/usr/bin/env bash
# Run ON A GPU MACHINE from the repository root (carry .deps; and .whl when it holds BitExact's
# sdist, bitexact-0.1.3.tar.gz, or wheels of the package's pinned build tools): builds the Python
# package `ree` with its CUDA kernels into a private folder (pip --target, the machine's torch),
# runs its GPU tests and, unless --no-bench, BitExact's table (python/benchmarks/bitexact_table.py,
# with BitExact built from the carried sdist when there is one) and python/benchmarks/host_cost.py.
#
#   scripts/gpu/python.sh [--out DIR] [--tests "FILES..."] [--no-bench] [--arch LIST]
#
# Logs go to --out, else $REE_GPU_OUT/python, else $OUT/python, else <repo>/out/gpu/python:
# build.log, pytest.log, bitexact_table.log, host_cost.log and summary.txt. Afterwards
# `PYTHONPATH=/tmp/ree-python python3 ...` imports the package built here.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${REE_GPU_OUT:-${OUT:-$repo/out/gpu}}/python"
tests="test_cuda.py test_fast_path.py test_ops_model.py test_ops_cpp.py test_reproducible_models.py test_errors.py test_package_libs.py"
bench=1
arch="90-real"
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --tests) tests="$2"; shift 2 ;;
    --no-bench) bench=0; shift ;;
    --arch) arch="$2"; shift 2 ;;
    *) echo "gpu/python.sh: unknown argument '$1' (see the header of this script)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# shellcheck source=scripts/gpu/deps-env.sh
source "$repo/scripts/gpu/deps-env.sh" || exit 2
python="${REE_PYTHON:-$(command -v python3)}"
target="${REE_PYTHON_TARGET:-/tmp/ree-python}"
tools="/tmp/ree-python-tools"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" PYTHONUNBUFFERED=1
start=$(date +%s)

# The pinned build tools (python/pyproject.toml) when their wheels were carried; else the machine's.
if ls "$repo"/.whl/*.whl >/dev/null 2>&1; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$tools" "$repo"/.whl/*.whl && export PYTHONPATH="$tools${PYTHONPATH:+:$PYTHONPATH}"
fi
peer=""
if ls "$repo"/.whl/bitexact-*.tar.gz >/dev/null 2>&1; then
  peer="/tmp/bitexact"
  ("$python" -m pip install -q --no-build-isolation --no-deps --target "$peer" \
    "$repo"/.whl/bitexact-*.tar.gz >"$out/bitexact_build.log" 2>&1 ||
    echo "BitExact did not build (bitexact_build.log)" >>"$summary") &
fi
REE_CUDA=ON "$python" -m pip install --no-build-isolation --no-deps --upgrade --target "$target" \
  -C cmake.define.REE_COMPILER=OFF -C cmake.define.CMAKE_CUDA_ARCHITECTURES="$arch" \
  "$repo/python" >"$out/build.log" 2>&1
rc=$?
wait
if [ $rc -ne 0 ]; then tail -n 30 "$out/build.log"; note "package build: FAILED"; exit $rc; fi
note "package build: ok in $(($(date +%s) - start)) s (REE_COMPILER=OFF: ree.compile is not built)"
export PYTHONPATH="$target${peer:+:$peer}${PYTHONPATH:+:$PYTHONPATH}"

files=()
for f in $tests; do files+=("$repo/python/tests/$f"); done
"$python" -m pytest -q -p no:cacheprovider "${files[@]}" >"$out/pytest.log" 2>&1
test_rc=$?
note "pytest: $(tail -n 1 "$out/pytest.log")"
if ((bench)); then
  "$python" "$repo/python/benchmarks/bitexact_table.py" --calls 5000 >"$out/bitexact_table.log" 2>&1
  "$python" "$repo/python/benchmarks/host_cost.py" >"$out/host_cost.log" 2>&1
  cat "$out/bitexact_table.log" "$out/host_cost.log" | tee -a "$summary"
fi
exit $test_rc
