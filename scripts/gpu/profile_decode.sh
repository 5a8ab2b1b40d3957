#!/usr/bin/env bash
# Run ON A GPU MACHINE from the repository root, after scripts/gpu/run.sh has built the tree (or
# with --build). Profiles batch-1 decode of a Llama-3-8B-shaped model (synthetic bf16 weights,
# nothing downloaded) with the reproducible operation set:
#   1. wall time of a 64-token generation (tokens/s as ree-launch prints it) and the host-side
#      phases of its decode steps (REE_PROFILE_STEPS);
#   2. ncu: the duration of every kernel of a few decode steps, summed per kernel name, against
#      the steps' wall time (the difference is time the GPU waits for the host);
#   3. ncu: the Speed Of Light, occupancy and warp-state sections of the GEMV at 4096 x 4096 and
#      4096 x 14336 (from bench_gpu_linear_bench).
# ncu runs with --clock-control none (the device README asks to leave the clocks alone).
#
#   scripts/gpu/profile_decode.sh [--out DIR] [--build DIR] [--skip-gemv]
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-$repo/out/profile}"
build="${REE_BUILD_DIR:-$repo/build-gpu}"
skip_gemv=0
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --skip-gemv) skip_gemv=1; shift ;;
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
common=(--model "synthetic:$out/llama3-8b" --prompt-ids "$ids" --max-context 256 --device cuda:0)

echo "== wall time, batch 1, 64 new tokens" | tee "$out/profile.txt"
REE_PROFILE_STEPS=1 "$launch" "${common[@]}" --max-new-tokens 64 >"$out/wall.log" 2>&1
grep -E "tokens/s|step profile|error" "$out/wall.log" | tail -3 | tee -a "$out/profile.txt"

if [ -z "$ncu_bin" ]; then
  echo "ncu not found: skipping the kernel profile" | tee -a "$out/profile.txt"
  exit 0
fi
# Kernel launches of one 8-token run: the first decode steps follow the prefill; skip the load and
# the prefill by name order (the prefill is the first forward pass) and keep the last steps.
"$ncu_bin" --clock-control none --csv --metrics gpu__time_duration.sum \
  "$launch" "${common[@]}" --max-new-tokens 8 >"$out/ncu-steps.csv" 2>"$out/ncu-steps.err"
"$python" - "$out/ncu-steps.csv" <<'EOF' | tee -a "$out/profile.txt"
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
header, rows = rows[0], rows[1:]
name_i, id_i, value_i = header.index("Kernel Name"), header.index("ID"), header.index("Metric Value")
unit_i = header.index("Metric Unit")
kernels = []
for r in rows:
    v = float(r[value_i].replace(",", ""))
    unit = r[unit_i]
    v = v / 1000.0 if unit == "nsecond" else (v if unit == "usecond" else v * 1000.0)
    kernels.append((int(r[id_i]), r[name_i].split("(")[0].split("<")[0], v))
kernels.sort()
print(f"ncu: {len(kernels)} kernels in an 8-token run")
# Every forward step starts with the embedding gather (sampling runs on the host).
steps, current = [], []
for k in kernels:
    if "embedding" in k[1] and current:
        steps.append(current)
        current = []
    current.append(k)
steps.append(current)
print(f"steps found: {len(steps)} (kernels per step: {[len(s) for s in steps]})")
decode = steps[2:] if len(steps) > 3 else steps[1:]  # steps[0]: load-time kernels + prefill
per = collections.defaultdict(float)
count = collections.Counter()
for s in decode:
    for _, name, us in s:
        per[name] += us / len(decode)
        count[name] += 1
total = sum(per.values())
print(f"decode step, kernels only (mean of {len(decode)} steps): {total:.1f} us")
for name, us in sorted(per.items(), key=lambda x: -x[1]):
    print(f"  {us:9.1f} us  {100 * us / total:5.1f}%  x{count[name] // max(1, len(decode)):4d}  {name}")
EOF

if ((skip_gemv)); then exit 0; fi
bench="$build/bench/bench_gpu_linear_bench"
[ -x "$bench" ] || bench="$(find "$build" -name 'bench_gpu_linear_bench' -type f | head -1)"
if [ -n "$bench" ]; then
  "$ncu_bin" --clock-control none --kernel-name regex:gemv --launch-skip 3 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    --section MemoryWorkloadAnalysis "$bench" 5 >"$out/ncu-gemv.txt" 2>&1
  grep -E "gemv|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Block Limit|Waves Per SM|Grid Size|Shared Memory Config" \
    "$out/ncu-gemv.txt" | head -80 | tee -a "$out/profile.txt"
fi
