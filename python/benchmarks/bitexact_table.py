"""BitExact's benchmark table for ree.ops: every operator BitExact offers, timed against PyTorch
(and against BitExact itself when it is installed: `pip install --no-build-isolation bitexact`,
CUDA only), with the largest difference from torch's result. Prints the device first.

    python python/benchmarks/bitexact_table.py                # cuda when available, else cpu
    python python/benchmarks/bitexact_table.py --device cpu --quick

fp32 inputs; TF32 is turned off so torch's matmul is an fp32 product too. Asserts nothing. Two
times per implementation:
  "ms" (per call): the median of --iters single calls after warm-up, CUDA events around ONE call
      and a synchronisation after it, so the host's time to issue the call is inside the figure;
  "queued ms": CUDA events around --queue calls issued back to back (synchronised only at the
      end), divided by --queue: the GPU time per call when the host keeps ahead of the GPU (the
      best of three such runs; on the CPU, wall time the same way).

A second table gives each operator's call overhead: the same calls on tiny inputs (8 x 64;
matmul 8 x 64 x 64), --calls of them back to back, host wall time per call in microseconds
(CUDA: synchronised once at the end, so kernels overlap the host work). On the large shapes a
GPU sits idle while the host prepares a call, so this overhead adds to the first table's per-call
times (not to its queued ones).
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import ree

try:
    import bitexact  # the peer (https://pypi.org/project/bitexact/)
except ImportError:
    bitexact = None


def timed(fn, iters, device):
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def queued(fn, calls, device):
    """Time per call (ms) of `calls` calls issued back to back, synchronised only at the end (CUDA:
    events around them): the best of three runs, after the warm-up of timed()."""
    best = float("inf")
    for _ in range(3):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            torch.cuda.synchronize()
            elapsed = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            elapsed = (time.perf_counter() - t0) * 1e3
        best = min(best, elapsed / calls)
    return best


def calls_per_us(fn, calls, device):
    """Host wall time per call (microseconds): the best of three runs of `calls` back-to-back
    calls after warm-up, synchronised once at the end of each run."""
    for _ in range(min(calls, 100)):
        fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def cases(device, rows, cols, m, k, n):
    """(op, shape, torch call, REE call, BitExact name, BitExact args) for x [rows, cols] and the
    matmul [m, k] @ [k, n]."""
    g = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(device)

    x, w, b = rand(rows, cols), rand(cols), rand(cols)
    a, bm = rand(m, k), rand(k, n)
    shape = f"{rows}x{cols}"
    yield ("matmul", f"{m}x{k}x{n}", lambda: torch.matmul(a, bm),
           lambda: ree.ops.matmul(a, bm), "matmul", (a, bm))
    yield ("rms_norm", shape, lambda: F.rms_norm(x, (cols,), w, 1e-6),
           lambda: ree.ops.rms_norm(x, w, 1e-6), "rms_norm", (x, w, 1e-6))
    yield ("layer_norm", shape, lambda: F.layer_norm(x, (cols,), w, b, 1e-5),
           lambda: ree.ops.layer_norm(x, w, b, 1e-5), "layer_norm", (x, w, b, 1e-5))
    for name, ref in (("sum", lambda: x.sum(-1)), ("mean", lambda: x.mean(-1)),
                      ("max", lambda: x.amax(-1)), ("min", lambda: x.amin(-1)),
                      ("var", lambda: x.var(-1, correction=0))):
        yield (name, shape, ref, (lambda op=getattr(ree.ops, name): op(x)), name, (x,))
    yield ("sigmoid", shape, lambda: torch.sigmoid(x), lambda: ree.ops.sigmoid(x),
           "sigmoid", (x,))


def peer_call(peer, name, args):
    """BitExact's function `name` bound to args, or None (not measured, or not offered)."""
    fn = getattr(bitexact, name, None) if peer else None
    return None if fn is None else (lambda: fn(*args))


def speed_table(device, args, peer):
    n = 1024 if args.quick else 4096
    m, k, kn = (256, 1024, 1024) if args.quick else (2048, 4096, 4096)
    print(f"per call: events around one call, synchronised after it (host latency included); "
          f"queued: {args.queue} calls back to back / {args.queue} (GPU time when the host keeps "
          "ahead)")
    header = f"{'op':<11}{'shape':<17}{'torch ms':>10}{'REE ms':>10}{'speed-up':>11}"
    if peer:
        header += f"{'BitExact ms':>13}{'vs BitExact':>12}"
    if args.queue:
        header += f"{'torch queued':>14}{'REE queued':>12}{'speed-up':>10}"
        if peer:
            header += f"{'BitExact queued':>17}{'vs BitExact':>12}"
    print(header + f"{'max |diff|':>12}  match")
    for op, shape, torch_fn, ree_fn, peer_name, peer_args in cases(device, n, n, m, k, kn):
        t_torch = timed(torch_fn, args.iters, device)
        t_ree = timed(ree_fn, args.iters, device)
        ours, theirs = ree_fn(), torch_fn()
        diff = (ours.double() - theirs.double()).abs().max().item()
        # Normwise: fp32 results of a different summation order differ by rounding in proportion
        # to the output's magnitude (a 4096-term matmul's outputs reach ~300, so an element near
        # zero can differ from torch's by 1e-3 with both well inside fp32's error bound).
        scale = theirs.double().abs().max().item()
        match = diff <= 1e-4 * max(scale, 1.0)
        line = f"{op:<11}{shape:<17}{t_torch:>10.3f}{t_ree:>10.3f}{t_torch / t_ree:>10.2f}x"
        fn = peer_call(peer, peer_name, peer_args)
        if peer:
            if fn is None:
                line += f"{'-':>13}{'-':>12}"
            else:
                t_peer = timed(fn, args.iters, device)
                line += f"{t_peer:>13.3f}{t_peer / t_ree:>11.2f}x"
        if args.queue:
            q_torch = queued(torch_fn, args.queue, device)
            q_ree = queued(ree_fn, args.queue, device)
            line += f"{q_torch:>14.3f}{q_ree:>12.3f}{q_torch / q_ree:>9.2f}x"
            if peer:
                if fn is None:
                    line += f"{'-':>17}{'-':>12}"
                else:
                    q_peer = queued(fn, args.queue, device)
                    line += f"{q_peer:>17.3f}{q_peer / q_ree:>11.2f}x"
        print(line + f"{diff:>12.2e}  {'yes' if match else 'NO'}")


def overhead_table(device, args, peer):
    print(f"\ncall overhead (tiny inputs; {args.calls} calls back to back; host us per call)")
    header = f"{'op':<11}{'shape':<17}{'torch us':>10}{'REE us':>10}{'REE - torch':>13}"
    print(header + (f"{'BitExact us':>13}" if peer else ""))
    for op, shape, torch_fn, ree_fn, peer_name, peer_args in cases(device, 8, 64, 8, 64, 64):
        t_torch = calls_per_us(torch_fn, args.calls, device)
        t_ree = calls_per_us(ree_fn, args.calls, device)
        line = f"{op:<11}{shape:<17}{t_torch:>10.1f}{t_ree:>10.1f}{t_ree - t_torch:>13.1f}"
        if peer:
            fn = peer_call(peer, peer_name, peer_args)
            line += f"{'-':>13}" if fn is None else f"{calls_per_us(fn, args.calls, device):>13.1f}"
        print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--queue", type=int, default=50,
                        help="calls per queued measurement of the large shapes (0: no queued "
                             "columns)")
    parser.add_argument("--calls", type=int, default=2000,
                        help="calls per call-overhead measurement (0: no call-overhead table)")
    parser.add_argument("--quick", action="store_true", help="small shapes (CPU smoke run)")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    peer = bitexact is not None and device.type == "cuda"
    print(f"device: {name} | torch {torch.__version__} | ree {ree.__version__} | "
          f"bitexact: {'yes' if peer else 'not measured'}")
    speed_table(device, args, peer)
    if args.calls > 0:
        overhead_table(device, args, peer)


if __name__ == "__main__":
    main()
