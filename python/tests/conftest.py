"""Shared helpers of the ree package tests (python/tests, docs/python.md "Tests")."""

import os
import shutil
from pathlib import Path

import pytest
import torch

import ree  # noqa: F401  (registers torch.ops.ree.*)

REPO = Path(__file__).resolve().parents[2]

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# Unit roundoff of each storage dtype (half an ulp at 1.0).
UNIT = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def randn(*shape, dtype=torch.float32, seed=0, scale=1.0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype).to(device)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a float tensor as integers (bitwise comparisons, NaN included)."""
    t = t.detach().contiguous().cpu()
    view = {4: torch.int32, 2: torch.int16, 8: torch.int64}[t.element_size()]
    return t.view(view) if t.is_floating_point() else t


def assert_bits_equal(a: torch.Tensor, b: torch.Tensor, what=""):
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    diff = (bits(a) != bits(b)).reshape(-1)
    if diff.any():
        i = int(diff.nonzero()[0])
        raise AssertionError(f"{what}: {int(diff.sum())} elements differ in bits, first at flat "
                             f"index {i}: {a.reshape(-1)[i].item()!r} vs {b.reshape(-1)[i].item()!r}")


def assert_within(actual: torch.Tensor, reference: torch.Tensor, bound, what=""):
    """|actual - reference| <= bound elementwise (bound a tensor or a number), in float64."""
    err = (actual.double().cpu() - reference.double().cpu()).abs()
    bound = torch.as_tensor(bound, dtype=torch.float64).cpu()
    ok = err <= bound
    if not bool(ok.all()):
        ratio = (err / bound.clamp_min(1e-300)).reshape(-1)
        i = int(ratio.argmax())
        raise AssertionError(f"{what}: error {err.reshape(-1)[i].item():.3g} above bound "
                             f"{torch.broadcast_to(bound, err.shape).reshape(-1)[i].item():.3g} at "
                             f"flat index {i} ({int((~ok).sum())} elements)")


def ulp_bound(reference: torch.Tensor, dtype, ulps=1.0):
    """`ulps` units in the last place of `dtype` at the reference's magnitude (subnormal floor)."""
    tiny = {torch.float32: 2.0**-149, torch.bfloat16: 2.0**-133, torch.float16: 2.0**-24}[dtype]
    return (reference.double().abs() * (2 * UNIT[dtype]) * ulps).clamp_min(tiny * ulps)


def ree_launch():
    """The ree-launch executable for the engine tests: $REE_LAUNCH, the repo's build/, or PATH."""
    for candidate in (os.environ.get("REE_LAUNCH"), REPO / "build" / "launcher" / "ree-launch",
                      shutil.which("ree-launch")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@pytest.fixture(scope="session")
def launcher():
    path = ree_launch()
    if path is None:
        if os.environ.get("REE_PYTHON_TESTS_STRICT") == "1":  # scripts/test.sh: never skip in CI
            pytest.fail("no ree-launch executable (REE_LAUNCH, build/launcher/ree-launch, PATH)")
        pytest.skip("no ree-launch executable: build REE (scripts/build.sh) or set REE_LAUNCH")
    return path
