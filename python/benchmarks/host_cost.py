"""Host time of one tiny ree.ops call on CUDA, with the GPU's time kept out of it, beside torch and
BitExact (when installed). The call-overhead table of bitexact_table.py runs calls back to back,
so a tiny kernel that takes longer on the GPU than its call takes on the host shows up there as
host cost; here ~100 ms of GPU work (torch.cuda._sleep) is queued first, so the host issues
--calls calls while the GPU is still busy, and the host time is read before synchronising.
Also prints the GPU time per call (events around --calls queued calls). Asserts nothing.

    python python/benchmarks/host_cost.py [--calls 400] [--repeats 7]
"""
import argparse
import statistics
import time

import torch

import ree

try:
    import bitexact  # the peer (https://pypi.org/project/bitexact/)
except ImportError:
    bitexact = None


def calls_to_time():
    x = torch.randn(8, 64, device="cuda")
    ops = {
        "ree.ops.sum": lambda: ree.ops.sum(x),
        "torch.ops.ree.sum": lambda: torch.ops.ree.sum.default(x),
        "torch.sum(x)": lambda: torch.sum(x),  # all elements, as measured in benchmarks.md
        "ree.ops.sigmoid": lambda: ree.ops.sigmoid(x),
        "torch.ops.ree.sigmoid": lambda: torch.ops.ree.sigmoid.default(x),
        "torch.sigmoid": lambda: torch.sigmoid(x),
        "ree.ops.exp": lambda: ree.ops.exp(x),
        "ree.ops.silu": lambda: ree.ops.silu(x),
        "ree.ops.max": lambda: ree.ops.max(x),
        "ree.ops.mean": lambda: ree.ops.mean(x),
        "torch.empty_like": lambda: torch.empty_like(x),
    }
    if bitexact is not None:
        ops["bitexact.sum"] = lambda: bitexact.sum(x)
        ops["bitexact.sigmoid"] = lambda: bitexact.sigmoid(x)
    return ops


def host_us(fn, calls, repeats):
    """Median and minimum host microseconds per call, the GPU busy throughout."""
    samples = []
    for _ in range(repeats):
        torch.cuda._sleep(200_000_000)  # ~100 ms of GPU work ahead of the calls
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples), min(samples)


def gpu_us(fn, calls):
    """GPU microseconds per call: events around `calls` calls queued behind a sleep."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(200_000_000)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=400, help="calls per timing (stay below ~1000: "
                   "the launch queue must not fill while the GPU sleeps)")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("host_cost.py: needs a CUDA device")
    print(f"device: {torch.cuda.get_device_name()} | torch {torch.__version__} | "
          f"bitexact: {'yes' if bitexact else 'not installed'}")
    print(f"{'call (8 x 64 fp32)':<24}{'host us':>9}{'min':>8}{'GPU us':>9}")
    for name, fn in calls_to_time().items():
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        median, low = host_us(fn, args.calls, args.repeats)
        print(f"{name:<24}{median:>9.2f}{low:>8.2f}{gpu_us(fn, args.calls):>9.2f}")


if __name__ == "__main__":
    main()
