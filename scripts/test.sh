#!/usr/bin/env bash
# The full CPU test suite on a fresh machine: installs dependencies, builds (CUDA targets are
# compiled when nvcc exists), runs every ctest test. GPU tests skip, saying why, without a GPU.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
# Without a visible GPU the CUDA objects are only compiled (nothing can run them): one real
# architecture (sm_90) is enough to check that they build, in about 60% of the time of the
# default three targets (80-real, 90-real, 90-virtual: CMakeLists.txt; docs/development.md).
# REE_TEST_CUDA_ARCHS overrides.
cuda_archs=()
if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
  cuda_archs=(-DCMAKE_CUDA_ARCHITECTURES="${REE_TEST_CUDA_ARCHS:-90-real}")
fi
"$repo/scripts/build.sh" "${cuda_archs[@]}"
build="${REE_BUILD_DIR:-$repo/build}"
ctest --test-dir "$build" --output-on-failure -j "${REE_TEST_JOBS:-2}" -LE slow "$@"

# The Python package (python/, docs/python.md): built from this CMake project (only the targets it
# links) and installed into the venv, then its pytest suite, whose engine tests compare with this
# build's ree-launch. Without a visible GPU the package's CUDA kernels are not compiled (they
# cannot run, and the main build already compiles them); REE_SKIP_PYTHON=1 skips this step.
if [ "${REE_SKIP_PYTHON:-0}" != "1" ]; then
  venv="${REE_VENV:-$repo/.venv}"
  package_cuda=OFF
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then package_cuda=AUTO; fi
  REE_CUDA="${REE_PYTHON_CUDA:-$package_cuda}" \
    "$venv/bin/python" -m pip install -q --no-build-isolation "$repo/python"
  REE_LAUNCH="$build/launcher/ree-launch" REE_PYTHON_TESTS_STRICT=1 \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/python/tests"
fi

# The input-handling tests again under AddressSanitizer + UndefinedBehaviorSanitizer: malformed
# configs, safetensors, GGUF files, tokenizers, prompts, receipts and flags (the hostile-input
# suite), the server's requests (malformed, cancelled streams, drain) and ONNX models (the
# compiler's API, one-operator and hostile models, fusions) must give errors, never memory faults.
# (CPU-only build without LibTorch, MPI or CUDA, to keep it fast; REE_SKIP_SANITIZE=1 skips it.)
if [ "${REE_SKIP_SANITIZE:-0}" != "1" ]; then
  asan="${REE_ASAN_BUILD_DIR:-$repo/build-asan}"
  # -O1 -g1 (line tables: enough for the sanitizers' stack traces), as ASan's documentation
  # suggests: half the compile time of -O2 -g on the 2-core CI machine.
  cmake -S "$repo" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREE_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DREE_CUDA=OFF -DREE_MPI=OFF -DREE_TORCH=OFF -DREE_BUILD_BENCH=OFF \
    -DREE_PYTHON="${REE_VENV:-$repo/.venv}/bin/python" >/dev/null
  cmake --build "$asan" --parallel "${REE_JOBS:-$(nproc)}" --target ree-launch \
    models_safetensors_test models_model_config_test models_tokenizer_test models_reproducible_test \
    models_receipt_test models_pipeline_test models_engine_limits_test models_gguf_test \
    models_gguf_tokenizer_test models_decode_lookahead_test models_logits_landing_test \
    core_file_test core_json_guard_test server_request_test compiler_test
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$asan" --output-on-failure -j "${REE_TEST_JOBS:-2}" \
    -R "models_(safetensors|model_config|tokenizer|reproducible|receipt|pipeline|engine_limits|gguf|gguf_tokenizer|decode_lookahead|logits_landing)_test|core_(file|json_guard)_test|launcher_(bad|hostile)_input|server_(request_test|openai_client)|compiler_(test|onnx_ops|hostile_onnx|fusion)"
fi

# The fuzz targets (tests/fuzz: safetensors, index, config, tokenizer, receipt, prompt-file and
# JSON-guard parsers) under libFuzzer + ASan/UBSan: their seed corpora as a regression check, then
# FUZZ_RUNS (default 100000) inputs each from seed 1, one target per core. A fixed seed and count
# bound the work (runs still differ a little: scripts/fuzz.sh), and a failure leaves the input to
# replay; open-ended fuzzing (FUZZ_SECONDS) is run by hand (docs/development.md). Needs clang-14
# (scripts/setup.sh); REE_SKIP_FUZZ=1 skips it.
if [ "${REE_SKIP_FUZZ:-0}" != "1" ]; then
  REE_FUZZ_BUILD_DIR="${REE_FUZZ_BUILD_DIR:-$repo/build-fuzz}" FUZZ_RUNS="${FUZZ_RUNS:-100000}" \
    "$repo/scripts/fuzz.sh"
fi
