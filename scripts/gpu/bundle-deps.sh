#!/usr/bin/env bash
# Run HERE (a Debian machine with apt): downloads the Debian packages that the GPU machines lack
# (header/dev packages, GoogleTest, Google Benchmark, ...) as .deb files into <repo>/.deps/debs,
# a git-ignored folder. Pass it to the device call with `carry: [".deps"]`; scripts/gpu/run.sh
# unpacks it with `dpkg -x` into a private prefix (never into /).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="$repo/.deps/debs"
PACKAGES=(
  libcxxopts-dev libfmt-dev libfmt9 nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libmpfr-dev libmpfr6 libgmp-dev libgmp10
  libssl-dev libssl3
  libcpp-httplib-dev libcpp-httplib0.11 zlib1g-dev libbrotli-dev libbrotli1
  libncurses-dev libncurses6 libncursesw6 libtinfo6
  libprotobuf-dev libprotobuf32 protobuf-compiler libprotoc32 libonnx-dev
)
mkdir -p "$dest"
cd "$dest"
missing=()
for pkg in "${PACKAGES[@]}"; do
  ls "${pkg}"_*.deb >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  apt-get download "${missing[@]}" 2>/dev/null || { apt-get update -q && apt-get download "${missing[@]}"; }
fi
ls -1 "$dest"/*.deb | sed "s|$repo/||"
du -sh "$dest"
