# shellcheck shell=bash
# Sourced ON A GPU MACHINE by scripts/gpu/run.sh, python.sh and pipeline.sh (or by hand, from the
# repository root: `source scripts/gpu/deps-env.sh`): unpacks the Debian packages that
# scripts/gpu/bundle-deps.sh carried in .deps/debs into a private prefix (dpkg -x, never into /)
# and exports the paths a build and the built programs need, with the machine-wide settings of
# every GPU run (no NVLink multicast; Open MPI as root).
# Returns 2, saying why, when .deps/debs holds no package.
ree_deps_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ree_deps_prefix="${REE_DEPS_PREFIX:-/tmp/ree-deps}"
if ! ls "$ree_deps_repo"/.deps/debs/*.deb >/dev/null 2>&1; then
  echo "gpu/deps-env.sh: no bundled packages in .deps/debs (run scripts/gpu/bundle-deps.sh here and carry .deps)" >&2
  return 2
fi
mkdir -p "$ree_deps_prefix"
for deb in "$ree_deps_repo"/.deps/debs/*.deb; do dpkg -x "$deb" "$ree_deps_prefix"; done
ree_deps_lib="$ree_deps_prefix/usr/lib/x86_64-linux-gnu"
case ":${LD_LIBRARY_PATH:-}:" in
  *":$ree_deps_lib:"*) ;;
  *)
    export CMAKE_PREFIX_PATH="$ree_deps_prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    export CPATH="$ree_deps_prefix/usr/include:$ree_deps_prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$ree_deps_lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$ree_deps_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    ;;
esac
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
