#!/usr/bin/env bash
# Run ON A GPU MACHINE from the repository root, after scripts/gpu/run.sh has built the tree (or
# with --build). Profiles batch-1 decode of a Llama-3-8B-shaped model (synthetic bf16 weights,
# nothing downloaded) with the reproducible operation set:
#   1. wall time of a 64-token generation (tokens/s as ree-launch prints it) and the host-side
#      phases of its decode steps (REE_PROFILE_STEPS);
#   2. a kernel timeline of a few decode steps at the GPU's own clocks (libree_kernel_trace.so,
#      CUPTI): kernel time per step summed per kernel name, and the GPU's idle time per step;
#   3. ncu: the Speed Of Light, occupancy and warp-state sections of the GEMV at 4096 x 4096 and
#      4096 x 14336 (from bench_gpu_linear_bench).
# --operation-set NAME profiles another set (default, deterministic; repops-3 through
# --repops-spec); the ATen sets' forward steps are found by their embedding's index_select kernel.
# --decode-lookahead profiles ree-launch --decode-lookahead (the next step queued with the tokens
# the GPU selected: the step-boundary idle it removes shows in the timeline's idle per step).
# ncu runs with --clock-control none (the device README asks to leave the clocks alone).
#
#   scripts/gpu/profile_decode.sh [--out DIR] [--build DIR] [--skip-gemv]
#                                 [--operation-set NAME] [--repops-spec VERSION]
#                                 [--decode-lookahead]
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-$repo/out/profile}"
build="${REE_BUILD_DIR:-$repo/build-gpu}"
skip_gemv=0
set_flags=()
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --skip-gemv) skip_gemv=1; shift ;;
    --operation-set) set_flags+=(--operation-set "$2"); shift 2 ;;
    --repops-spec) set_flags+=(--repops-spec "$2"); shift 2 ;;
    --decode-lookahead) set_flags+=(--decode-lookahead); shift ;;
    *) echo "profile_decode.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
python="${REE_PYTHON:-$(command -v python3)}"
launch="$build/launcher/ree-launch"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
export NCCL_NVLS_ENABLE=0

"$python" - "$out/llama3-8b" <<'EOF'
import json, os, sys
directory = sys.argv[1]
os.makedirs(directory, exist_ok=True)
json.dump(dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=4096,
               intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192,
               rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
               torch_dtype="bfloat16", bos_token_id=128000, eos_token_id=128001,
               hidden_act="silu"), open(os.path.join(directory, "config.json"), "w"))
EOF
ids="$("$python" -c 'print(",".join(str(1000 + j * 7919 % 120000) for j in range(32)))')"
common=(--model "synthetic:$out/llama3-8b" --prompt-ids "$ids" --max-context 256 --device cuda:0
        ${set_flags[@]+"${set_flags[@]}"})

echo "== wall time, batch 1, 64 new tokens ${set_flags[*]-}" | tee "$out/profile.txt"
REE_PROFILE_STEPS=1 "$launch" "${common[@]}" --max-new-tokens 64 >"$out/wall.log" 2>&1
grep -E "tokens/s|step profile|error" "$out/wall.log" | tail -3 | tee -a "$out/profile.txt"

# Kernel timeline of a 16-token run at the GPU's own clocks (bench/cuda/kernel_trace.cpp).
tracer="$(find "$build" -name 'libree_kernel_trace.so' -type f | head -1)"
if [ -z "$tracer" ]; then
  echo "libree_kernel_trace.so not built (no CUPTI): skipping the kernel timeline" | tee -a "$out/profile.txt"
else
  CUDA_INJECTION64_PATH="$tracer" REE_KERNEL_TRACE="$out/trace.csv" \
    "$launch" "${common[@]}" --max-new-tokens 16 >"$out/trace.log" 2>&1
  "$python" - "$out/trace.csv" <<'EOF' | tee -a "$out/profile.txt"
import collections, csv, re, sys
acts = []
for r in csv.DictReader(open(sys.argv[1])):
    name = r["name"]
    if r["kind"] == "kernel":
        name = name.replace("(anonymous namespace)::", "")
        name = re.sub(r"\(.*$", "", name)  # drop the argument list
        name = re.sub(r"^(void )?(ree::)?(repops::)?(cuda::)?", "", name)
    acts.append((int(r["start_ns"]), int(r["end_ns"]), r["kind"], name))
acts.sort()
# A forward step starts with the embedding gather (tokens come from the host).
# (ATen sets: the embedding is an index_select kernel).
starts = [a[0] for a in acts if a[2] == "kernel" and re.search(r"embedding|indexselect", a[3].lower())]
print(f"trace: {len(acts)} activities, {len(starts)} forward steps")
if len(starts) < 5:
    sys.exit(0)
decode = list(zip(starts[2:-1], starts[3:]))  # skip the prefill and the first decode step
per, count = collections.defaultdict(float), collections.Counter()
busy_total = span_total = 0.0
for begin, end in decode:
    inside = [a for a in acts if begin <= a[0] < end]
    span_total += (end - begin) / 1e3
    covered, last = 0, begin
    for s, e, kind, name in inside:
        per[name] += (e - s) / 1e3 / len(decode)
        count[name] += 1
        s = max(s, last)
        if e > s:
            covered += e - s
            last = e
    busy_total += covered / 1e3
n = len(decode)
print(f"decode step (mean of {n}): {span_total / n:.1f} us from one embedding to the next; "
      f"GPU busy {busy_total / n:.1f} us, idle {(span_total - busy_total) / n:.1f} us")
total = sum(per.values())
for name, us in sorted(per.items(), key=lambda x: -x[1])[:25]:
    calls = count[name] / n
    print(f"  {us:9.1f} us  {100 * us / total:5.1f}%  x{calls:5.1f}  {us / calls:7.2f} us/call  {name[:90]}")
EOF
fi

if ((skip_gemv)) || [ -z "$ncu_bin" ]; then exit 0; fi
bench="$build/bench/bench_gpu_linear_bench"
[ -x "$bench" ] || bench="$(find "$build" -name 'bench_gpu_linear_bench' -type f | head -1)"
if [ -n "$bench" ]; then
  "$ncu_bin" --clock-control none --kernel-name regex:gemv --launch-skip 3 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    --section MemoryWorkloadAnalysis "$bench" 5 >"$out/ncu-gemv.txt" 2>&1
  grep -E "gemv|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Block Limit|Waves Per SM|Grid Size|Shared Memory Config" \
    "$out/ncu-gemv.txt" | head -80 | tee -a "$out/profile.txt"
fi
