#!/usr/bin/env bash
# Pipeline checks and benchmarks ON A MULTI-GPU MACHINE, after scripts/gpu/run.sh built build-gpu.
#
#   scripts/gpu/pipeline.sh identity   # bitwise equivalence: CPU n=1 vs GPU n=1..G (NCCL and MPI
#                                      # transports, single process), greedy + sampled, 3 models;
#                                      # deterministic set across n on the GPUs
#   scripts/gpu/pipeline.sh bench      # Llama-3-8B shape: n=1 vs n=G aggregate decode and batch-1
#                                      # latency; Qwen2.5-72B shape: n=2 and n=4 (synthetic bf16
#                                      # weights generated on load), tokens/s, GPU memory, hashes
#   scripts/gpu/pipeline.sh scale      # issue 24's acceptance setup: Llama-3-8B shape, 64 prompts x
#                                      # 128 tokens, n=1 (max-batch 16) vs n=G (G micro-batches of 16:
#                                      # equal per-stage micro-batch size), batch-1 latency n=1 vs n=G;
#                                      # Qwen2.5-72B shape, 64 prompts x 128 tokens at n=G
#   scripts/gpu/pipeline.sh receipts   # receipts across devices/partitions; verify vs generate time
#   scripts/gpu/pipeline.sh single     # single-process pipelines over several GPUs vs the CPU
#   scripts/gpu/pipeline.sh mem72      # Qwen2.5-72B shape on every GPU: memory per GPU
#   scripts/gpu/pipeline.sh timeline   # batch-1 decode, n=G: per-stage and per-hop time (CUPTI)
#   scripts/gpu/pipeline.sh fault      # rank 1 killed / stopped mid-generation over NCCL: every
#                                      # rank ends non-zero within 30 s, no orphans
#
# REE_PIPELINE_FLAGS adds ree-launch flags to every run of `scale` (e.g. "--repops-spec repops-3");
# REE_SKIP_8B=1 / REE_SKIP_72B=1 leave out that half of `scale`.
#
# Logs and a summary go to $OUT (or out/gpu). Prints PASS/FAIL lines; exits non-zero on a FAIL.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${REE_GPU_OUT:-${OUT:-$repo/out/gpu}}/pipeline"
mkdir -p "$out"
build="${REE_BUILD_DIR:-$repo/build-gpu}"
launch="$build/launcher/ree-launch"
python="${REE_PYTHON:-$(command -v python3)}"
# shellcheck source=scripts/gpu/deps-env.sh
source "$repo/scripts/gpu/deps-env.sh" || exit 2
export REE_CACHE_DIR="${REE_CACHE_DIR:-/tmp/ree-cache}"
mpirun=(mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x REE_CACHE_DIR)
gpus=$(nvidia-smi --list-gpus | wc -l)
summary="$out/summary.txt"
failures=0
exec 3>&1  # notes reach the terminal even from commands whose output is redirected
note() { echo "$*" | tee -a "$summary" >&3; }
check() {  # name, file, reference file
  if cmp -s "$2" "$3" && [ -s "$2" ]; then note "PASS $1"; else
    note "FAIL $1"
    failures=$((failures + 1))
  fi
}
normalise() {
  "$python" -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line)
        print(json.dumps([r["prompt_ids"], r["output_ids"], r["finish_reason"],
                          r["output_ids_sha256"], r["step_logits_sha256"]]))'
}
tokens_per_s() { grep -oE "[0-9.]+ tokens/s" "$1" | tail -1; }

# COUNT prompts of LENGTH token ids each (deterministic, distinct per prompt), one JSON per line.
write_prompts() {  # count length file
  "$python" - "$1" "$2" >"$3" <<'EOF'
import sys
count, length = int(sys.argv[1]), int(sys.argv[2])
for i in range(count):
    ids = ", ".join(str(1000 + (j * 7919 + i * 104729) % 120000) for j in range(length))
    print('{"prompt_ids": [%s]}' % ids)
EOF
}

write_config() {  # name dir
  "$python" - "$1" "$2" <<'EOF'
import json, os, sys
name, directory = sys.argv[1], sys.argv[2]
os.makedirs(directory, exist_ok=True)
configs = {
  "llama3-8b": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=4096,
                    intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192,
                    rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                    torch_dtype="bfloat16", bos_token_id=128000, eos_token_id=128001,
                    hidden_act="silu"),
  "qwen2.5-72b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=8192,
                      intermediate_size=29568, num_hidden_layers=80, num_attention_heads=64,
                      num_key_value_heads=8, vocab_size=152064, max_position_embeddings=32768,
                      rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
                      torch_dtype="bfloat16", bos_token_id=151643, eos_token_id=151643,
                      hidden_act="silu", use_sliding_window=False, sliding_window=131072,
                      max_window_layers=80),
}
json.dump(configs[name], open(os.path.join(directory, "config.json"), "w"), indent=1)
EOF
}

identity() {
  "$python" -c '
for i in range(6):
    print("\"Prompt %d: reproducible pipelines on any hardware%s\"" % (i, "!" * (7 * i)))' \
    >"$out/prompts.jsonl"
  "$python" "$repo/scripts/reference/hf_reference.py" "$out/hf" --steps 2 --only llama3,qwen2 \
    >"$out/hf.log" 2>&1
  "$python" -c '
for i in range(6):
    print("{\"prompt_ids\": [%s]}" % ", ".join(str((j * 37 + i * 11) % 300 + 3) for j in range(3 + 9 * i)))' \
    >"$out/ids.jsonl"
  for model in builtin:tiny-llama "$out/hf/llama3" "$out/hf/qwen2"; do
    tag=$(basename "$model" | tr ':' '-')
    prompts="$out/prompts.jsonl"
    [ "$tag" = builtin-tiny-llama ] || prompts="$out/ids.jsonl"
    for sampling in greedy sampled; do
      extra=(--prompt-file "$prompts" --json --max-new-tokens 32 --max-context 256)
      [ "$sampling" = sampled ] && extra+=(--temperature 0.7 --top-k 50 --seed 9)
      ref="$out/$tag-$sampling-cpu.norm"
      "$launch" --model "$model" --cpu-only "${extra[@]}" 2>"$out/err.log" | normalise >"$ref"
      max_n=$gpus
      [ "$tag" != builtin-tiny-llama ] && [ "$max_n" -gt 3 ] && max_n=3  # 3 layers
      for n in $(seq 1 "$max_n"); do
        "${mpirun[@]}" -n "$n" "$launch" --model "$model" --n-partitions "$n" "${extra[@]}" \
          2>>"$out/err.log" | normalise >"$out/$tag-$sampling-nccl$n.norm"
        check "$tag $sampling: GPU n=$n (NCCL) == CPU" "$out/$tag-$sampling-nccl$n.norm" "$ref"
      done
      "${mpirun[@]}" -n 2 "$launch" --model "$model" --n-partitions 2 --transport mpi \
        "${extra[@]}" 2>>"$out/err.log" | normalise >"$out/$tag-$sampling-mpi2.norm"
      check "$tag $sampling: GPU n=2 (MPI transport) == CPU" "$out/$tag-$sampling-mpi2.norm" "$ref"
      devices=$(seq -s, 0 $((gpus - 1)) | sed 's/\([0-9]\+\)/cuda:\1/g')
      n_single=$gpus
      [ "$tag" != builtin-tiny-llama ] && [ "$n_single" -gt 3 ] && n_single=3 &&
        devices="cuda:0,cuda:1,cuda:2"
      "$launch" --model "$model" --n-partitions "$n_single" --stage-devices "$devices" \
        "${extra[@]}" 2>>"$out/err.log" | normalise >"$out/$tag-$sampling-single.norm"
      check "$tag $sampling: one process, $n_single stages on $devices == CPU" \
        "$out/$tag-$sampling-single.norm" "$ref"
    done
  done
  # deterministic (ATen) set: identical across n on the same GPU kind (no promise vs the CPU).
  extra=(--prompt-file "$out/prompts.jsonl" --json --max-new-tokens 32 --operation-set deterministic)
  "$launch" --model builtin:tiny-llama --device cuda:0 "${extra[@]}" 2>>"$out/err.log" |
    normalise >"$out/det-n1.norm"
  for n in 2 "$gpus"; do
    "${mpirun[@]}" -n "$n" "$launch" --model builtin:tiny-llama --n-partitions "$n" "${extra[@]}" \
      2>>"$out/err.log" | normalise >"$out/det-n$n.norm"
    check "deterministic: GPU n=$n == GPU n=1" "$out/det-n$n.norm" "$out/det-n1.norm"
  done
}

# Samples GPU memory in use every second while a command runs; prints the per-GPU maximum (MiB).
with_memory() {  # log, command...
  local log="$1"
  shift
  (while true; do nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits; sleep 1; done) \
    >"$log.mem" 2>/dev/null &
  local sampler=$!
  "$@"
  local rc=$?
  kill $sampler 2>/dev/null
  wait $sampler 2>/dev/null
  note "  peak GPU memory (MiB): $(awk -F', ' '{ if ($2 > m[$1]) m[$1] = $2 } END { for (g in m) printf "gpu%s=%s ", g, m[g] }' "$log.mem")"
  return $rc
}

bench() {
  write_config llama3-8b "$out/llama3-8b"
  write_prompts 16 32 "$out/bench16.jsonl"
  head -1 "$out/bench16.jsonl" >"$out/bench1.jsonl"
  model="synthetic:$out/llama3-8b"
  common=(--model "$model" --json --max-new-tokens 64 --max-context 128)
  note "== Llama-3-8B shape (synthetic bf16), reproducible, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  for case in "1 bench1 1" "$gpus bench1 1" "1 bench16 16" "$gpus bench16 16"; do
    set -- $case
    n=$1 file=$2 batch=$3
    log="$out/bench-8b-n$n-$file.log"
    with_memory "$log" "${mpirun[@]}" -n "$n" "$launch" "${common[@]}" --n-partitions "$n" \
      --prompt-file "$out/$file.jsonl" --max-batch "$batch" >"$log.out" 2>"$log"
    note "  n=$n prompts=$batch max-batch=$batch: $(tokens_per_s "$log") (generated tokens / wall time incl. prefill)"
    normalise <"$log.out" >"$log.norm"
  done
  check "8B n=$gpus == n=1 (batch 16)" "$out/bench-8b-n$gpus-bench16.log.norm" "$out/bench-8b-n1-bench16.log.norm"
  check "8B n=$gpus == n=1 (batch 1)" "$out/bench-8b-n$gpus-bench1.log.norm" "$out/bench-8b-n1-bench1.log.norm"

  [ "${REE_SKIP_72B:-0}" = 1 ] && return
  write_config qwen2.5-72b "$out/qwen72b"
  model="synthetic:$out/qwen72b"
  note "== Qwen2.5-72B shape (synthetic bf16 generated on load), reproducible"
  for n in 2 4; do
    [ "$n" -le "$gpus" ] || continue
    log="$out/bench-72b-n$n.log"
    visible=$(seq -s, 0 $((n - 1)))
    start=$SECONDS
    CUDA_VISIBLE_DEVICES=$visible with_memory "$log" "${mpirun[@]}" -x CUDA_VISIBLE_DEVICES -n "$n" \
      "$launch" --model "$model" --n-partitions "$n" --prompt-file "$out/bench16.jsonl" \
      --max-batch 4 --max-new-tokens 32 --max-context 256 --json --comm-timeout 120 \
      >"$log.out" 2>"$log"
    note "  n=$n: rc=$? $(tokens_per_s "$log") (16 prompts x 32 tokens, max-batch 4); wall $((SECONDS - start)) s incl. load"
    grep "\[ree\]" "$log" | tee -a "$summary"
    normalise <"$log.out" >"$log.norm"
  done
  check "72B n=4 == n=2" "$out/bench-72b-n4.log.norm" "$out/bench-72b-n2.log.norm"
}

# Aggregate decode of n=G against n=1 at the same micro-batch size per stage (16 sequences), and
# the batch-1 latency of n=G against n=1; outputs must be bitwise equal across n.
scale() {
  write_config llama3-8b "$out/llama3-8b"
  write_prompts 64 64 "$out/scale64.jsonl"
  head -1 "$out/scale64.jsonl" >"$out/scale1.jsonl"
  local extra log
  read -r -a extra <<<"${REE_PIPELINE_FLAGS:-}"
  local common=(--json --max-new-tokens 128 --max-context 256 "${extra[@]}")
  [ "${REE_SKIP_8B:-0}" = 1 ] || scale8b
  [ "${REE_SKIP_72B:-0}" = 1 ] && return
  write_config qwen2.5-72b "$out/qwen72b"
  log="$out/scale-72b-n$gpus.log"
  local start=$SECONDS
  with_memory "$log" "${mpirun[@]}" -n "$gpus" "$launch" --model "synthetic:$out/qwen72b" \
    --n-partitions "$gpus" --prompt-file "$out/scale64.jsonl" --max-batch 64 \
    --micro-batches "$gpus" "${common[@]}" --comm-timeout 300 >"$log.out" 2>"$log"
  note "  72B n=$gpus, 64 prompts x 128 tokens${extra[*]:+ (${extra[*]})}: rc=$? $(tokens_per_s "$log") (target >= 600); wall $((SECONDS - start)) s incl. load"
}

# scale's Llama-3-8B half (uses scale's `common`).
scale8b() {
  note "== scale: Llama-3-8B shape (synthetic bf16), 64-token prompts x 128 new tokens, reproducible ${REE_PIPELINE_FLAGS:-}, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $gpus"
  local n file batch micro log
  for case in "1 scale64 16 1" "$gpus scale64 $((16 * gpus)) $gpus" "1 scale1 1 1" "$gpus scale1 1 $gpus"; do
    set -- $case
    n=$1 file=$2 batch=$3 micro=$4
    log="$out/scale-8b-n$n-$file.log"
    with_memory "$log" "${mpirun[@]}" -n "$n" "$launch" --model "synthetic:$out/llama3-8b" \
      --n-partitions "$n" --prompt-file "$out/$file.jsonl" --max-batch "$batch" \
      --micro-batches "$micro" "${common[@]}" >"$log.out" 2>"$log"
    note "  n=$n $file max-batch=$batch micro-batches=$micro: rc=$? $(tokens_per_s "$log")"
    normalise <"$log.out" >"$log.norm"
  done
  check "scale 8B n=$gpus == n=1 (64 prompts)" "$out/scale-8b-n$gpus-scale64.log.norm" \
    "$out/scale-8b-n1-scale64.log.norm"
  check "scale 8B n=$gpus == n=1 (batch 1)" "$out/scale-8b-n$gpus-scale1.log.norm" \
    "$out/scale-8b-n1-scale1.log.norm"
  "$python" - "$out" "$gpus" <<'EOF2' | tee -a "$summary"
import re, sys
out, g = sys.argv[1], sys.argv[2]
def tps(name):
    found = re.findall(r"([0-9.]+) tokens/s", open(f"{out}/{name}").read())
    return float(found[-1]) if found else float("nan")
agg = tps(f"scale-8b-n{g}-scale64.log") / tps("scale-8b-n1-scale64.log")
lat = tps("scale-8b-n1-scale1.log") / tps(f"scale-8b-n{g}-scale1.log") - 1
print(f"  8B: n={g} aggregate = {agg:.2f}x n=1 (target >= 2.5x); batch-1 overhead of n={g}: "
      f"{100 * lat:+.1f}% (target <= 8%)")
EOF2
}

receipts() {
  work="$out/receipts"
  mkdir -p "$work"
  base=(--model builtin:tiny-llama --prompt-text "Receipts make runs checkable" --max-new-tokens 48
    --trace-hashes)
  "$launch" "${base[@]}" --device cuda:0 --receipt-path "$work/gpu.json" >/dev/null 2>>"$work/log"
  "${mpirun[@]}" -n "$gpus" "$launch" "${base[@]}" --n-partitions "$gpus" \
    --receipt-path "$work/gpu-n$gpus.json" >/dev/null 2>>"$work/log"
  "$launch" "${base[@]}" --cpu-only --receipt-path "$work/cpu.json" >/dev/null 2>>"$work/log"
  for pair in "gpu.json --cpu-only" "gpu-n$gpus.json --cpu-only" "cpu.json --device cuda:0" \
    "gpu-n$gpus.json --device cuda:0 --n-partitions 1" "gpu.json --device cuda:0 --n-partitions 4"; do
    set -- $pair
    receipt=$1
    shift
    if "$launch" verify "$work/$receipt" --model builtin:tiny-llama "$@" >>"$work/log" 2>&1; then
      note "PASS receipt $receipt verifies with $*"
    else
      note "FAIL receipt $receipt does not verify with $*"
      failures=$((failures + 1))
    fi
  done
  write_config llama3-8b "$out/llama3-8b"
  model="synthetic:$out/llama3-8b"
  note "== verify vs generate, Llama-3-8B shape, batch 1, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  note "  SHA-256 on this host: $(openssl speed -bytes 524288 -seconds 1 sha256 2>/dev/null | tail -1)"
  for tokens in 256 1024; do
    ids=$(seq -s, 1000 1031)
    start=$(date +%s.%N)
    "$launch" --model "$model" --device cuda:0 --prompt-ids "$ids" --max-new-tokens $tokens \
      --max-context 1100 --receipt-path "$work/8b-$tokens.json" >/dev/null 2>"$work/8b-gen-$tokens.log"
    "$launch" --model "$model" --device cuda:0 --prompt-ids "$ids" --max-new-tokens $tokens \
      --max-context 1100 >/dev/null 2>"$work/8b-gen-noreceipt-$tokens.log"
    "$launch" --model "$model" --device cuda:0 --prompt-ids "$ids" --max-new-tokens $tokens \
      --max-context 1100 --trace-hashes >/dev/null 2>"$work/8b-gen-trace-$tokens.log"
    "$launch" verify "$work/8b-$tokens.json" --model "$model" --device cuda:0 --json \
      >"$work/8b-verify-$tokens.json" 2>"$work/8b-verify-$tokens.log"
    note "  $tokens tokens: generate (with receipt) $(grep -oE '[0-9]+ tokens in [0-9.]+ s' "$work/8b-gen-$tokens.log"); without receipt $(grep -oE '[0-9]+ tokens in [0-9.]+ s' "$work/8b-gen-noreceipt-$tokens.log"); with --trace-hashes $(grep -oE '[0-9]+ tokens in [0-9.]+ s' "$work/8b-gen-trace-$tokens.log"); verify: $(cat "$work/8b-verify-$tokens.json" | head -c 600)"
  done
}

mem72() {
  write_config qwen2.5-72b "$out/qwen72b"
  "$python" -c '
for i in range(4):
    print("{\"prompt_ids\": [%s]}" % ", ".join(str(1000 + j * 31 + i) for j in range(32)))' >"$out/mem4.jsonl"
  note "== Qwen2.5-72B shape, n=$gpus: GPU memory"
  with_memory "$out/mem72.log" "${mpirun[@]}" -n "$gpus" "$launch" --model "synthetic:$out/qwen72b" \
    --n-partitions "$gpus" --prompt-file "$out/mem4.jsonl" --max-batch 4 --max-new-tokens 8 \
    --max-context 256 --json --comm-timeout 120 >"$out/mem72.out" 2>"$out/mem72.log"
  grep "\[ree\]" "$out/mem72.log" | tee -a "$summary"
}

single() {  # single-process pipelines over several GPUs vs the CPU
  "$python" -c '
for i in range(6):
    print("\"Prompt %d: reproducible pipelines on any hardware%s\"" % (i, "!" * (7 * i)))' \
    >"$out/prompts.jsonl"
  extra=(--prompt-file "$out/prompts.jsonl" --json --max-new-tokens 32 --max-context 256)
  "$launch" --model builtin:tiny-llama --cpu-only "${extra[@]}" 2>"$out/err.log" | normalise >"$out/single-cpu.norm"
  devices=$(seq -s, 0 $((gpus - 1)) | sed 's/\([0-9]\+\)/cuda:\1/g')
  "$launch" --model builtin:tiny-llama --n-partitions "$gpus" --stage-devices "$devices" \
    "${extra[@]}" 2>>"$out/err.log" | normalise >"$out/single-gpus.norm"
  check "one process, $gpus stages on $devices == CPU" "$out/single-gpus.norm" "$out/single-cpu.norm"
  "$launch" --model builtin:tiny-llama --n-partitions 4 --device cuda:1 "${extra[@]}" \
    2>>"$out/err.log" | normalise >"$out/single-gpu1.norm"
  check "one process, 4 stages on cuda:1 == CPU" "$out/single-gpu1.norm" "$out/single-cpu.norm"
  tail -3 "$out/err.log"
}

# Faults over NCCL: rank 1 killed, then stopped (SIGSTOP, --comm-timeout 3), mid-generation. The
# job must end non-zero within 30 s, leave no ree-launch process, and the stall must name rank 1.
fault() {
  "$python" -c '
for i in range(64):
    print("{\"prompt_ids\": [%s]}" % ", ".join(str(3 + (j * 13 + i) % 250) for j in range(16)))' \
    >"$out/fault-prompts.jsonl"
  local n=$gpus
  [ "$n" -gt 4 ] && n=4
  for signal in KILL STOP; do
    local extra=()
    [ "$signal" = STOP ] && extra=(--comm-timeout 3)
    "${mpirun[@]}" -n "$n" "$launch" --model builtin:tiny-llama --n-partitions "$n" \
      --prompt-file "$out/fault-prompts.jsonl" --max-new-tokens 2000 --max-context 2048 \
      --max-batch 2 "${extra[@]}" >"$out/fault-$signal.out" 2>"$out/fault-$signal.err" &
    local job=$! victim=""
    for _ in $(seq 1 300); do
      for p in /proc/[0-9]*; do
        [ "$(tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -x 'OMPI_COMM_WORLD_RANK=1')" ] || continue
        tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "ree-launch.*fault-prompts" && victim=$(basename "$p")
      done
      [ -n "$victim" ] && break
      sleep 0.1
    done
    sleep 8  # past start-up: generation is running
    if [ -z "$victim" ]; then
      note "FAIL fault $signal: rank 1 not found"
      failures=$((failures + 1))
      kill -9 $job 2>/dev/null
      continue
    fi
    kill -"$signal" "$victim"
    local waited=0
    while kill -0 $job 2>/dev/null && [ $waited -lt 60 ]; do
      sleep 1
      waited=$((waited + 1))
    done
    kill -0 $job 2>/dev/null && kill -9 $job "$victim" 2>/dev/null
    wait $job
    local rc=$?
    sleep 1
    local orphans=0
    pgrep -f "ree-launch.*fault-prompts" >/dev/null && orphans=1 && pkill -9 -f "ree-launch.*fault-prompts"
    if [ "$rc" -ne 0 ] && [ $waited -le 30 ] && [ $orphans -eq 0 ] &&
      { [ "$signal" = KILL ] || grep -qF "rank 1" "$out/fault-$signal.err"; }; then
      note "PASS fault $signal over NCCL, n=$n: job ended ${waited} s after the fault, rc=$rc"
    else
      note "FAIL fault $signal over NCCL, n=$n: rc=$rc, ended after ${waited} s, orphans=$orphans"
      failures=$((failures + 1))
    fi
    grep -v "^\s*$" "$out/fault-$signal.err" | grep -v "^\[" | head -4 | sed 's/^/    /' | tee -a "$summary"
  done
}

# Batch-1 decode over n=G ranks with a CUPTI kernel trace per rank (bench/cuda/kernel_trace.cpp):
# where a step's time goes, per stage and per hop (scripts/gpu/pipeline_timeline.py).
timeline() {
  local tracer
  tracer="$(find "$build" -name 'libree_kernel_trace.so' -type f | head -1)"
  if [ -z "$tracer" ]; then
    note "FAIL timeline: libree_kernel_trace.so not built (no CUPTI)"
    failures=$((failures + 1))
    return
  fi
  write_config llama3-8b "$out/llama3-8b"
  local dir="$out/timeline"
  rm -rf "$dir"
  mkdir -p "$dir"
  ids=$(seq -s, 1000 1031)
  note "== batch-1 pipeline timeline, Llama-3-8B shape, n=$gpus, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  "${mpirun[@]}" -x CUDA_INJECTION64_PATH="$tracer" -n "$gpus" bash -c \
    'REE_KERNEL_TRACE="$0/trace.$OMPI_COMM_WORLD_RANK.csv" exec "$@"' "$dir" \
    "$launch" --model "synthetic:$out/llama3-8b" --n-partitions "$gpus" --prompt-ids "$ids" \
    --max-new-tokens 24 --max-context 128 >"$dir/run.out" 2>"$dir/run.log"
  note "  $(grep -oE '[0-9]+ tokens in [0-9.]+ s.*' "$dir/run.log" | tail -1)"
  "$python" "$repo/scripts/gpu/pipeline_timeline.py" "$dir" | tee -a "$summary"
}

case "${1:-identity}" in
  identity) identity ;;
  fault) fault ;;
  timeline) timeline ;;
  bench) bench ;;
  scale) scale ;;
  receipts) receipts ;;
  mem72) mem72 ;;
  single) single ;;
  *) echo "pipeline.sh: unknown mode '$1'" >&2; exit 2 ;;
esac
note "pipeline.sh $1: $failures failure(s)"
[ "$failures" -eq 0 ]
