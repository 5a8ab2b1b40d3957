"""The package's shared libraries export no libstdc++ internals (cmake/ReeLibstdcxx.cmake).

A compiler without a shared libstdc++ links libstdc++.a into each REE library. Exported, those
copies get half-bound to the process's libstdc++.so.6 (loaded by Python and LibTorch) and an
std::istringstream crashed inside ree.Engine on Ubuntu 24.04. With the symbols hidden this test
passes for either kind of compiler; without them it fails on such a machine.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

import ree

# Symbols defined only in libstdc++'s own objects (never instantiated by user code): locale
# machinery and the out-of-line number extraction that crashed.
LIBSTDCXX_INTERNALS = ("_ZNSt6locale7classicEv", "_ZNSt6locale5_ImplC", "_ZNSi10_M_extractI")


def package_libraries():
    return sorted(Path(ree.__file__).parent.glob("*.so*"))


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils' nm is not installed")
@pytest.mark.parametrize("library", package_libraries(), ids=lambda p: p.name)
def test_library_exports_no_libstdcxx_internals(library):
    listing = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    leaked = [line.split()[-1] for line in listing.splitlines()
              if line.split()[-1].startswith(LIBSTDCXX_INTERNALS)]
    assert not leaked, f"{library.name} exports libstdc++'s own symbols: {leaked[:3]}"


def test_engine_runs_beside_torch():
    """The call that crashed: hostAvailableMemoryBytes' istringstream, with LibTorch loaded."""
    import torch  # noqa: F401  (loads the system libstdc++ first, as in a user's process)

    engine = ree.Engine("builtin:tiny-llama", operation_set="reproducible", device="cpu")
    result = engine.generate(["hello"], max_new_tokens=2)
    assert len(result.completions[0].ids) == 2
