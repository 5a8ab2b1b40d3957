#!/usr/bin/env bash
# Run ON A GPU MACHINE from the repository root, after scripts/gpu/run.sh has built the tree (or
# with --build). Profiles the RepOps kernel benchmarks:
#   1. a kernel timeline of bench_gpu_attention_bench at the GPU's own clocks
#      (libree_kernel_trace.so, CUPTI): per decode batch, kernel time per call and the GPU's idle
#      time per call (host work between the timed events);
#   2. ncu (Speed Of Light, occupancy, warp states, compute pipes) of chosen launches: the attention
#      chunk and merge kernels at batch 1 and 16, RMSNorm bf16 4096 x 4096, softmax f32 512 x 128256,
#      the gated (SwiGLU), rope and embedding kernels, the correctly rounded exp kernel, and the
#      GEMV at M = 8 (K = N = 4096, x bf16 and x fp32) with the shared-memory tables.
# ncu runs with --clock-control none (the device README asks to leave the clocks alone).
#
#   scripts/gpu/profile_ops.sh [--out DIR] [--build DIR] [--no-ncu]
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-$repo/out/profile}"
build="${REE_BUILD_DIR:-$repo/build-gpu}"
run_ncu=1
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --no-ncu) run_ncu=0; shift ;;
    *) echo "profile_ops.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
python="${REE_PYTHON:-$(command -v python3)}"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
bench_dir="$build/bench"
tracer="$(find "$build" -name 'libree_kernel_trace.so' -type f | head -1)"

if [ -n "$tracer" ]; then
  echo "== kernel timeline: attention bench" | tee "$out/ops-profile.txt"
  CUDA_INJECTION64_PATH="$tracer" REE_KERNEL_TRACE="$out/attention-trace.csv" \
    "$bench_dir/bench_gpu_attention_bench" >"$out/attention-traced.log" 2>&1
  cat "$out/attention-traced.log" >>"$out/ops-profile.txt"
  "$python" - "$out/attention-trace.csv" <<'EOF' | tee -a "$out/ops-profile.txt"
import collections, csv, re, sys
acts = []
for r in csv.DictReader(open(sys.argv[1])):
    name = re.sub(r"\(.*$", "", r["name"].replace("(anonymous namespace)::", ""))
    acts.append((int(r["start_ns"]), int(r["end_ns"]), r["kind"], name))
acts.sort()
# Calls: each decode call is one chunk kernel (split) followed by one merge kernel.
calls = []
for i, a in enumerate(acts):
    # The split path's chunk kernel: attentionChunkKernel<T, false, ...> (the tracer writes the
    # template's commas as ';'; demanglers write the bool as "false" or "(bool)0").
    if re.search(r"attentionChunkKernel<[^;,]+[;,] (false|\(bool\)0)", a[3]):
        j = i + 1
        while j < len(acts) and "attentionMergeKernel" not in acts[j][3]:
            j += 1
        if j < len(acts):
            calls.append((a, acts[j]))
# Per batch the bench runs 53 single calls (3 warm-up + 50), then 3 + 11 x 20 back-to-back calls.
single, stream = 53, 3 + 11 * 20
med = lambda xs: sorted(xs)[len(xs) // 2] / 1e3 if xs else float("nan")
for b, batch in enumerate([1, 4, 8, 16]):
    base = b * (single + stream)
    group = calls[base + 3:base + single]
    if not group:
        continue
    chunk = med([c[0][1] - c[0][0] for c in group])
    merge = med([c[1][1] - c[1][0] for c in group])
    gap = med([c[1][0] - c[0][1] for c in group])
    span = med([c[1][1] - c[0][0] for c in group])
    print(f"batch {batch:2d}: chunk kernel {chunk:8.1f} us, merge {merge:7.1f} us, "
          f"gap {gap:6.1f} us, first start to last end {span:8.1f} us (medians, single calls)")
    run = calls[base + single + 3:base + single + stream]
    if len(run) > 1:
        period = med([run[i + 1][0][0] - run[i][0][0] for i in range(len(run) - 1)])
        print(f"          back to back: chunk kernel {med([c[0][1] - c[0][0] for c in run]):8.1f} us, "
              f"merge {med([c[1][1] - c[1][0] for c in run]):7.1f} us, "
              f"call to call {period:8.1f} us (medians)")
EOF
fi

if ((run_ncu == 0)) || [ -z "$ncu_bin" ]; then exit 0; fi
sections=(--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section MemoryWorkloadAnalysis_Tables)
summarise() {
  grep -E "^  [a-zA-Z].*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall [A-Z]|Block Limit|Waves Per SM|Grid Size|Block Size|Issue Slots Busy|Executed Ipc A|One or More Eligible|L1/TEX Hit|L2 Hit|Dynamic Shared|Static Shared|Shared Load|Shared Store|Bank" "$1" | head -${2:-60}
}
profile() {  # name, regex, skip, then the program and its arguments
  local name="$1" regex="$2" skip="$3"
  shift 3
  "$ncu_bin" --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" \
    --launch-skip "$skip" --launch-count 1 "${sections[@]}" "$@" >"$out/ncu-$name.txt" 2>&1
  echo "== ncu $name" | tee -a "$out/ops-profile.txt"
  summarise "$out/ncu-$name.txt" | tee -a "$out/ops-profile.txt"
}
# attention bench: 276 split calls per batch (1, 4, 8, 16: 53 single, then 223 back to back);
# the 832nd is batch 16's first timed single call.
split_chunk="attentionChunkKernel<[^,]+, (false|\\(bool\\)0)"
profile attention-chunk-b16 "$split_chunk" 831 "$bench_dir/bench_gpu_attention_bench"
profile attention-merge-b16 "attentionMergeKernel" 831 "$bench_dir/bench_gpu_attention_bench"
profile attention-chunk-b1 "$split_chunk" 3 "$bench_dir/bench_gpu_attention_bench"
profile attention-merge-b1 "attentionMergeKernel" 3 "$bench_dir/bench_gpu_attention_bench"
# rowops bench, bf16 first: rowKernel<0 (RMSNorm) runs 25 launches per shape for rows 128, 1024,
# 4096 of cols 4096 (rows 1 and 16 take the small-row kernel).
profile rmsnorm-bf16-4096 "rowKernel<\\(int\\)0, ree::bf16_t, ree::bf16_t" 50 "$bench_dir/bench_gpu_rowops_bench"
profile pointwise-gated "gatedKernel" 3 "$bench_dir/bench_gpu_pointwise_bench"
profile pointwise-rope "ropeKernel" 3 "$bench_dir/bench_gpu_pointwise_bench"
profile pointwise-embedding "embeddingKernel" 3 "$bench_dir/bench_gpu_pointwise_bench"
profile crmath-exp "unaryMathKernel<\\(int\\)0>" 2 "$bench_dir/bench_gpu_crmath_bench"
# linear bench with 5 iterations: 8 launches (3 warm-up + 5) per x dtype and M; for K = N = 4096
# M = 1 and 4 come first (32 launches), then M = 8 with x bf16 (32..39) and x fp32 (40..47).
profile gemv-m8-xbf16 "gemv4?Kernel" 36 "$bench_dir/bench_gpu_linear_bench" 5
profile gemv-m8-xf32 "gemv4?Kernel" 44 "$bench_dir/bench_gpu_linear_bench" 5
