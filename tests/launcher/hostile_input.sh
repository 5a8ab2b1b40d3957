#!/usr/bin/env bash
# Hostile input through the real ree-launch (issue 31): a table of cases over the file formats
# (config.json, generation_config.json, safetensors, the shard index, tokenizer.json), the flags,
# the prompts (text, ids, JSONL), receipts (validate and verify) and MPI runs. Each case must
#  - end by itself within the per-case timeout (a hang is a failure, not a skip),
#  - exit non-zero and below 128 (no signal, no sanitizer abort),
#  - print exactly one stderr line, starting "ree-launch: error: " and containing the case's
#    culprit (a flag, file, field, tensor or rank name),
#  - leave no process behind (ree-launch, mpirun, orted),
#  - and, in a sanitizer build, make no sanitizer report.
# MPI cases: every "ree-launch: error:" line names the culprit (mpirun adds its own banner).
# A few hostile inputs have a correct answer other than an error (an informational receipt field,
# an empty-matching regex): those cases must succeed. Hostile files come from hostile_files.py.
#   hostile_input.sh PATH/TO/ree-launch WORK_DIR [PYTHON [MPIEXEC]]
# REE_HOSTILE_TIMEOUT (default 20 s) is the per-case limit; REE_HOSTILE_ONLY=REGEX runs the
# cases whose id matches; REE_HOSTILE_VERBOSE=1 also lists the passing cases (with the first line
# of their stderr: the error message that the case checked).
set -u
launch="$1"
work="$2"
python="${3:-python3}"
mpiexec="${4:-}"
here="$(cd "$(dirname "$0")" && pwd)"
source_dir="$(cd "$here/../.." && pwd)"
limit="${REE_HOSTILE_TIMEOUT:-20}"
only="${REE_HOSTILE_ONLY:-}"
verbose="${REE_HOSTILE_VERBOSE:-}"
rm -rf "$work"
mkdir -p "$work"
export REE_CACHE_DIR="$work/cache"
# Marks every process started here, so that leftovers can be found (and only ours).
export REE_HOSTILE_SUITE="$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Memory: a case that tries to allocate far too much must be refused, not take the machine down.
if ldd "$launch" 2>/dev/null | grep -q asan || nm -D "$launch" 2>/dev/null | grep -q __asan_init; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=8192"
  memory_limit=unlimited
else
  memory_limit=$((8 * 1024 * 1024))  # KiB of address space per case
fi
passed=0
failed=0
failed_ids=()

# PIDs of ree-launch / MPI launcher processes that carry this suite's marker.
leftovers() {
  local pid
  for pid in $(pgrep -x 'ree-launch|mpirun|mpiexec|orterun|orted|prterun|prted' 2>/dev/null); do
    if { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "REE_HOSTILE_SUITE=$work"; then
      echo "$pid"
    fi
  done
}

report_failure() {  # id, why, command...
  local id="$1" why="$2"
  shift 2
  echo "FAIL [$id] $why: $*" | cut -c1-400
  sed 's/^/  | /' "$work/err" | head -4 | cut -c1-400
  failed=$((failed + 1))
  failed_ids+=("$id")
}

# run KIND ID NEEDLE COMMAND...
#   KIND: err (one-line error naming NEEDLE), rerr (the same for validate/verify, whose line may
#         also read "ree-launch: invalid:", exit 1: counts or hashes that disagree),
#         mpi (every rank's error line names NEEDLE), ok (must succeed),
#         bounded (ends in time; an error, if any, is one line)
run() {
  local kind="$1" id="$2" needle="$3"
  shift 3
  if [ -n "$only" ] && ! [[ "$id" =~ $only ]]; then return; fi
  local start=$SECONDS
  (ulimit -v "$memory_limit" 2>/dev/null; exec timeout -k 5 "$limit" "$@") \
    >"$work/out" 2>"$work/err" </dev/null
  local rc=$?
  local elapsed=$((SECONDS - start))
  local stray
  stray=$(leftovers)
  if [ -n "$stray" ]; then
    kill -9 $stray 2>/dev/null
    report_failure "$id" "left processes behind ($(echo $stray))" "$@"
    return
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    report_failure "$id" "hang: still running after $limit s" "$@"
    return
  fi
  if [ "$rc" -ge 128 ]; then
    report_failure "$id" "killed by signal $((rc - 128))" "$@"
    return
  fi
  # A sanitizer report fails every kind of case (UBSan may report and carry on, exit 0).
  if grep -qE "runtime error:|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer" "$work/err"; then
    report_failure "$id" "sanitizer report (rc=$rc)" "$@"
    return
  fi
  local lines errors
  lines=$(wc -l <"$work/err")
  local prefix="^ree-launch: error: "
  [ "$kind" = rerr ] && prefix="^ree-launch: (error|invalid): "
  errors=$(grep -cE "$prefix" "$work/err")
  case "$kind" in
    ok)
      if [ "$rc" -ne 0 ]; then
        report_failure "$id" "rc=$rc, expected success" "$@"
        return
      fi
      ;;
    err | rerr | bounded)
      if [ "$kind" = bounded ] && [ "$rc" -eq 0 ]; then
        :
      elif [ "$rc" -eq 0 ]; then
        report_failure "$id" "accepted (rc=0), expected an error naming '$needle'" "$@"
        return
      elif [ "$lines" -ne 1 ] || [ "$errors" -ne 1 ]; then
        report_failure "$id" "rc=$rc, $lines stderr line(s), expected one 'ree-launch: error:'" "$@"
        return
      elif [ "$kind" != bounded ] && ! grep -qF -- "$needle" "$work/err"; then
        report_failure "$id" "rc=$rc, the error does not name '$needle'" "$@"
        return
      fi
      ;;
    mpi)
      if [ "$rc" -eq 0 ] || [ "$errors" -eq 0 ] ||
        [ "$(grep "^ree-launch: error: " "$work/err" | grep -cF -- "$needle")" -ne "$errors" ]; then
        report_failure "$id" "rc=$rc, $errors error line(s), each must name '$needle'" "$@"
        return
      fi
      ;;
  esac
  passed=$((passed + 1))
  [ -z "$verbose" ] || echo "pass [$id] ($elapsed s) $(head -1 "$work/err" | cut -c1-300)"
}

# --- Set-up: the built-in model as the base of every hostile model directory, a receipt. ------
"$launch" --model builtin:tiny-llama --cpu-only --prompt-ids 1 --max-new-tokens 1 >/dev/null 2>&1
base="$(dirname "$(find "$REE_CACHE_DIR" -name config.json | head -1)")"
m="$work/m"
"$python" "$here/hostile_files.py" models "$base" "$m" || { echo "hostile_files.py models failed"; exit 1; }
printf '%s\n' '"Hello receipts"' '{"prompt_ids": [1, 2, 3]}' >"$work/two.jsonl"
"$launch" --model builtin:tiny-llama --cpu-only --prompt-file "$work/two.jsonl" --max-new-tokens 4 \
  --receipt-path "$work/receipt.json" >/dev/null 2>&1 || { echo "could not write the receipt"; exit 1; }
r="$work/r"
"$python" "$here/hostile_files.py" receipts "$work/receipt.json" "$r" "$source_dir/scripts/reference" ||
  { echo "hostile_files.py receipts failed"; exit 1; }
mkfifo "$work/fifo"
mkdir -p "$work/dir"
truncate -s 2G "$work/sparse-2g"

b=(--model builtin:tiny-llama --cpu-only)
g=(--cpu-only --prompt-ids 1,2 --max-new-tokens 2)   # with --model DIR
p=("${b[@]}" --prompt-text hi)                       # + the flags under test

model() {  # model KIND ID DIR NEEDLE [extra flags]
  local kind="$1" id="$2" dir="$3" needle="$4"
  shift 4
  run "$kind" "$id" "$needle" "$launch" --model "$m/$dir" "${g[@]}" "$@"
}

# --- config.json ----------------------------------------------------------------------------
model err config-layers-2p31 cfg-layers-2p31 num_hidden_layers
model err config-layers-2p40 cfg-layers-2p40 num_hidden_layers
model err config-layers-0 cfg-layers-0 num_hidden_layers
model err config-layers-negative cfg-layers-neg num_hidden_layers
model err config-layers-string cfg-layers-string num_hidden_layers
model err config-layers-float cfg-layers-float num_hidden_layers
model err config-hidden-2p62 cfg-hidden-2p62 hidden_size
model err config-intermediate-2p62 cfg-inter-2p62 intermediate_size
model err config-hidden-0 cfg-hidden-0 hidden_size
model err config-vocab-0 cfg-vocab-0 vocab_size
model err config-vocab-2p40 cfg-vocab-2p40 vocab_size
model err config-heads-0 cfg-heads-0 num_attention_heads
model err config-heads-2p40 cfg-heads-2p40 num_attention_heads
model err config-kv-heads-3 cfg-kvheads-3 num_key_value_heads
model err config-kv-heads-0 cfg-kvheads-0 num_key_value_heads
model err config-head-dim-0 cfg-headdim-0 head_dim
model err config-max-position-0 cfg-maxpos-0 max_position_embeddings
model err config-eps-negative cfg-eps-neg rms_norm_eps
model err config-eps-huge cfg-eps-huge rms_norm_eps
model err config-theta-0 cfg-theta-0 rope_theta
model err config-theta-negative cfg-theta-neg rope_theta
model err config-model-type-mamba cfg-mamba mamba
model err config-no-model-type cfg-no-type model_type
model err config-hidden-act cfg-act-relu6 relu6
model err config-rope-scaling cfg-rope-weird rope_scaling
model err config-vocab-300-over-258 cfg-vocab-300 model.embed_tokens.weight
model err config-eos-beyond-vocab cfg-eos-beyond eos_token_id
model err config-3-layers-over-4 cfg-layers-3 model.layers.3
model err config-5-layers-over-4 cfg-layers-5 model.layers.4
model err config-mistral-sliding-window-4 cfg-mistral-sw4 sliding_window --max-context 16
model err config-duplicate-key cfg-dup-key num_hidden_layers
model err config-truncated cfg-truncated config.json
model err config-array cfg-array config.json
model err config-deep-nesting cfg-deep config.json
model err config-nan-literal cfg-nan config.json
model err config-fifo cfg-fifo "config.json': is a FIFO"
model err config-directory cfg-dir "is a directory"
model err config-dev-zero cfg-zero "config.json"
model err config-2gib cfg-huge "config.json"
model err config-empty cfg-empty "config.json"
run err synthetic-layers-2p40 num_hidden_layers "$launch" --model "synthetic:$m/cfg-layers-2p40" \
  "${g[@]}"
run err synthetic-hidden-2p62 hidden_size "$launch" --model "synthetic:$m/cfg-hidden-2p62" "${g[@]}"

# --- generation_config.json -------------------------------------------------------------------
model err generation-eos-negative gen-eos-neg eos_token_id
model err generation-eos-string gen-eos-string eos_token_id
model err generation-eos-2p40 gen-eos-2p40 eos_token_id
model err generation-eos-list gen-eos-list-bad eos_token_id
model err generation-duplicate-key gen-dup-key eos_token_id
model err generation-bad-json gen-bad-json generation_config.json
model err generation-fifo gen-fifo "generation_config.json': is a FIFO"
model err generation-directory gen-dir "generation_config.json': is a directory"
model err generation-dev-zero gen-zero generation_config.json
model err generation-2gib gen-huge generation_config.json

# --- model.safetensors ------------------------------------------------------------------------
model err st-truncated st-truncated model.safetensors
model err st-short-header st-short-header model.safetensors
model err st-header-2p63 st-header-2p63 model.safetensors
model err st-header-past-end st-header-past-end model.safetensors
model err st-header-0 st-header-0 model.safetensors
model err st-header-not-json st-header-not-json model.safetensors
model err st-header-array st-header-array model.safetensors
model err st-duplicate-tensor st-dup-tensor lm_head.weight
model err st-offsets-past-end st-offsets-past-end model.layers.0.self_attn.q_proj.weight
model err st-offsets-reversed st-offsets-reversed model.layers.0.self_attn.q_proj.weight
model err st-dtype-q4 st-dtype-q4 model.layers.0.self_attn.q_proj.weight
model err st-shape-negative st-shape-neg model.layers.0.self_attn.q_proj.weight
model err st-shape-overflow st-shape-overflow model.layers.0.self_attn.q_proj.weight
model err st-shape-wrong st-shape-wrong model.layers.0.self_attn.q_proj.weight
model err st-shape-data-mismatch st-shape-data-mismatch model.layers.0.self_attn.q_proj.weight
model err st-nan-embedding st-nan-embed model.embed_tokens.weight
model err st-inf-q-proj st-inf-qproj model.layers.0.self_attn.q_proj.weight
model err st-nan-final-norm st-nan-norm model.norm.weight
model err st-inf-lm-head st-inf-lmhead lm_head.weight
model ok st-nan-embedding-allowed st-nan-embed "" --allow-non-finite-weights
model err st-extra-tensor st-extra-99 model.layers.99.extra.weight
# The research flags that relax the checkpoint's rules let the same files load.
model ok st-extra-tensor-allowed st-extra-99 "" --allow-extra-tensors
model err st-extra-control-chars st-extra-ctrl 'bad\x01name'
model err st-missing-tensor st-missing-norm model.norm.weight
model bounded st-unaligned-data st-unaligned-data model.safetensors
model err st-metadata-array st-metadata-array __metadata__
model err st-100k-zero-byte-tensors st-100k-tensors extra.
model err st-fifo st-fifo "model.safetensors': is a FIFO"
model err st-directory st-dir "model.safetensors': is a directory"
model err st-dev-zero st-zero model.safetensors
model err st-2gib-sparse st-huge model.safetensors
model err st-empty st-empty model.safetensors

# --- model.safetensors.index.json ---------------------------------------------------------------
model ok index-control idx-ok ""
model err index-bad-json idx-bad-json model.safetensors.index.json
model err index-missing-shard idx-missing-shard model-00009-of-00009.safetensors
model err index-path-traversal idx-traversal model.norm.weight
model err index-absolute-path idx-absolute model.norm.weight
model err index-tensor-not-in-shard idx-tensor-not-in-shard model.layers.0.ghost.weight
model err index-map-array idx-map-array weight_map
model err index-no-map idx-no-map weight_map
model err index-duplicate-key idx-dup-key model.norm.weight
model bounded index-100k-metadata idx-100k-metadata model.safetensors.index.json
model err index-fifo idx-fifo "model.safetensors.index.json': is a FIFO"
model err index-directory idx-dir "model.safetensors.index.json': is a directory"
model err index-2gib idx-huge model.safetensors.index.json

# --- tokenizer.json (text prompts go through it) ---------------------------------------------------
tok() {  # tok KIND ID DIR NEEDLE [prompt]
  run "$1" "$2" "$4" "$launch" --model "$m/$3" --cpu-only --prompt-text "${5:-hello world}" \
    --max-new-tokens 2
}
tok err tokenizer-added-id-beyond-vocab tok-added-beyond 99999
tok err tokenizer-added-id-negative tok-added-neg tokenizer.json
tok err tokenizer-vocab-id-beyond tok-vocab-beyond tokenizer.json
tok err tokenizer-unigram tok-unigram Unigram
tok err tokenizer-unknown-normalizer tok-normalizer Bogus
tok err tokenizer-catastrophic-regex tok-regex-catastrophic "field 'pre_tokenizer.pattern'" \
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"
tok err tokenizer-invalid-regex tok-regex-invalid tokenizer.json
tok ok tokenizer-empty-matching-regex tok-regex-empty "" "xxabcxx y"
tok err tokenizer-duplicate-key tok-dup-key added_tokens
tok err tokenizer-bad-json tok-bad-json tokenizer.json
tok err tokenizer-deep-nesting tok-deep tokenizer.json
tok err tokenizer-fifo tok-fifo "tokenizer.json': is a FIFO"
tok err tokenizer-directory tok-dir "tokenizer.json': is a directory"
tok err tokenizer-symlink-dev-zero tok-zero tokenizer.json
tok err tokenizer-2gib tok-huge tokenizer.json

# --- flags ------------------------------------------------------------------------------------
flag() {  # flag ID NEEDLE FLAGS...
  local id="$1" needle="$2"
  shift 2
  run err "flag-$id" "$needle" "$launch" "${p[@]}" "$@"
}
flag temperature-nan "--temperature 'nan'" --temperature nan
flag temperature-inf "--temperature 'inf'" --temperature inf
flag temperature-negative "--temperature '-1'" --temperature -1
flag temperature-huge "--temperature '1e5'" --temperature 1e5
flag temperature-hex "--temperature '0x1p-3'" --temperature 0x1p-3
flag temperature-space "--temperature ' 1'" --temperature " 1"
flag temperature-empty "--temperature ''" --temperature ""
flag top-p-0 "--top-p '0'" --top-p 0
flag top-p-2 "--top-p '2'" --top-p 2
flag top-p-nan "--top-p 'nan'" --top-p nan
flag top-p-denormal "--top-p '1e-50'" --top-p 1e-50
flag top-k-negative "--top-k '-1'" --top-k -1
flag top-k-2p31 "--top-k '2147483648'" --top-k 2147483648
flag top-k-float "--top-k '1.5'" --top-k 1.5
flag seed-negative "--seed '-1'" --seed -1
flag seed-2p64 "--seed '18446744073709551616'" --seed 18446744073709551616
flag seed-exponent "--seed '1e3'" --seed 1e3
flag seed-plus "--seed '+5'" --seed +5
flag max-new-tokens-0 "--max-new-tokens '0'" --max-new-tokens 0
flag max-new-tokens-1e12 "--max-new-tokens '1e12'" --max-new-tokens 1e12
flag max-new-tokens-2p31 "--max-new-tokens '2147483648'" --max-new-tokens 2147483648
flag max-batch-0 "--max-batch '0'" --max-batch 0
flag max-batch-huge "--max-batch '1048577'" --max-batch 1048577
flag kv-blocks-2p31 "--kv-blocks 2147483647: the KV cache on cpu needs" --kv-blocks 2147483647 \
  --max-context 16
flag memory-budget-1e6-kv-blocks "--kv-blocks 2147483647" --memory-budget-gib 1000000 \
  --kv-blocks 2147483647 --max-context 64
flag kv-blocks-negative "--kv-blocks '-1'" --kv-blocks -1
flag kv-blocks-2p31-plus "--kv-blocks '2147483648'" --kv-blocks 2147483648
flag kv-memory-fraction-2 "--kv-memory-fraction '2'" --kv-memory-fraction 2
flag kv-memory-fraction-nan "--kv-memory-fraction 'nan'" --kv-memory-fraction nan
flag kv-block-size-0 "--kv-block-size '0'" --kv-block-size 0
flag prefill-chunk-negative "--prefill-chunk '-1'" --prefill-chunk -1
flag no-prefix-cache-value "--no-prefix-cache" --no-prefix-cache=false
flag decode-lookahead-value "--decode-lookahead" --decode-lookahead=yes
flag no-cuda-graphs-value "--no-cuda-graphs" --no-cuda-graphs=yes
flag kv-blocks-one "need 3 KV cache blocks of 16 tokens, the pool holds 1; raise --kv-blocks" \
  --kv-blocks 1 --max-new-tokens 40
flag max-context-negative "--max-context '-1'" --max-context -1
flag max-context-huge "--max-context '99999999999'" --max-context 99999999999
flag max-context-over-model "--max-context" --max-context 100000
flag threads-negative "--threads '-1'" --threads -1
flag threads-5000 "--threads '5000'" --threads 5000
flag n-partitions-0 "--n-partitions '0'" --n-partitions 0
flag n-partitions-over-layers "--n-partitions" --n-partitions 99
flag partition-layers-letter "--partition-layers" --n-partitions 2 --partition-layers 1,x
flag partition-layers-sum "--partition-layers" --n-partitions 2 --partition-layers 5,0
flag micro-batches-negative "--micro-batches '-1'" --micro-batches -1
flag memory-budget-nan "--memory-budget-gib 'nan'" --memory-budget-gib nan
flag memory-budget-negative "--memory-budget-gib '-1'" --memory-budget-gib -1
flag memory-budget-1e7 "--memory-budget-gib '1e7'" --memory-budget-gib 1e7
flag memory-budget-tiny "--memory-budget-gib" --memory-budget-gib 0.000001
flag comm-timeout-0 "--comm-timeout '0'" --comm-timeout 0
flag comm-timeout-nan "--comm-timeout 'nan'" --comm-timeout nan
flag comm-timeout-1e9 "--comm-timeout '1e9'" --comm-timeout 1e9
flag transport "--transport 'carrier'" --transport carrier
flag dtype "--dtype 'int4'" --dtype int4
flag operation-set "--operation-set 'fast'" --operation-set fast
flag device-tpu "--device" --device tpu
flag device-negative "--device" --device cuda:-1
flag device-huge "--device" --device cuda:99999999999
flag stage-devices "--stage-devices" --n-partitions 2 --stage-devices cpu,tpu
flag switch-with-value "--json takes no value" --json=false
flag plan-with-value "--plan takes no value" --plan=1
flag repeated "--temperature is given more than once" --temperature 0.5 --temperature 1
# A value that looks like a switch with a value is still a value.
run ok flag-value-like-a-switch "" "$launch" "${b[@]}" --max-new-tokens 2 --prompt-text "--json=x"
flag unknown "no-such-flag" --no-such-flag
flag stray-argument "unexpected argument 'stray'" stray
flag receipt-path-empty "--receipt-path is empty" --receipt-path ""
flag receipt-path-no-dir "/nonexistent/dir/r.json" --receipt-path /nonexistent/dir/r.json
flag receipt-path-directory "$work/dir" --receipt-path "$work/dir"
run err flag-model-missing-value "'model' is missing an argument" "$launch" --cpu-only \
  --prompt-text hi --model
run err flag-model-empty "--model is required" "$launch" --model "" --cpu-only --prompt-text hi
run err flag-model-builtin-unknown "builtin:nope" "$launch" --model builtin:nope --cpu-only \
  --prompt-text hi
run err flag-model-dev-zero "/dev/zero" "$launch" --model /dev/zero --cpu-only --prompt-text hi
run err flag-model-file "receipt.json" "$launch" --model "$work/receipt.json" --cpu-only \
  --prompt-text hi
run err flag-model-and-model-name "--model and --model-name" "$launch" "${p[@]}" \
  --model-name builtin:tiny-llama

# --- prompts ------------------------------------------------------------------------------------
ids() {  # ids ID NEEDLE VALUE
  run err "ids-$1" "$2" "$launch" "${b[@]}" --max-new-tokens 2 --prompt-ids "$3"
}
ids spaces-and-sign "--prompt-ids ' 1, +2'" " 1, +2"
ids trailing-comma "item 3 ''" "1,2,"
ids leading-comma "item 1 ''" ",1"
ids empty-item "item 2 ''" "1,,2"
ids negative "item 1 '-1'" "-1"
ids 2p31 "item 1 '2147483648'" "2147483648"
ids exponent "item 1 '1e3'" "1e3"
ids hex "item 1 '0x10'" "0x10"
ids empty "--prompt-ids is empty" ""
ids space-separated "item 1 '1 2'" "1 2"
ids twenty-digits "item 1 '99999999999999999999'" "99999999999999999999"
ids beyond-vocab "999999" "1,999999"
run err prompt-none "exactly one of --prompt-text" "$launch" "${b[@]}"
run err prompt-two "exactly one of --prompt-text" "$launch" "${b[@]}" --prompt-text a --prompt-ids 1
run err prompt-too-long "--max-context" "$launch" "${b[@]}" --max-context 8 --prompt-ids \
  1,2,3,4,5,6,7,8,9,10

jsonl() {  # jsonl ID NEEDLE CONTENT (printf %b)
  printf '%b' "$3" >"$work/$1.jsonl"
  run err "jsonl-$1" "$2" "$launch" "${b[@]}" --max-new-tokens 2 --prompt-file "$work/$1.jsonl"
}
jsonl not-json "not-json.jsonl':1: not valid JSON" 'not json\n'
jsonl duplicate-key "repeats the key 'prompt'" '{"prompt": "a", "prompt": "b"}\n'
jsonl prompt-number "\"prompt\" must be a string" '{"prompt": 3}\n'
jsonl ids-empty "\"prompt_ids\" must be a non-empty array" '{"prompt_ids": []}\n'
jsonl ids-negative "prompt_ids[0] is -1" '{"prompt_ids": [-1]}\n'
jsonl ids-float "prompt_ids[1] is 1.5" '{"prompt_ids": [1, 1.5]}\n'
jsonl ids-2p31 "prompt_ids[0] is 2147483648" '{"prompt_ids": [2147483648]}\n'
jsonl ids-string "prompt_ids[0] is \"1\"" '{"prompt_ids": ["1"]}\n'
jsonl ids-beyond-vocab "999999" '{"prompt_ids": [1, 999999]}\n'
jsonl both-keys "both-keys.jsonl':1: expected a JSON string" '{"prompt": "a", "prompt_ids": [1]}\n'
jsonl unknown-key "unknown key 'text'" '{"text": "a"}\n'
jsonl array "array.jsonl':1: expected a JSON string" '[1, 2]\n'
jsonl null ":1: expected a JSON string" 'null\n'
jsonl second-line-bad "second-line-bad.jsonl':2:" '"fine"\n{"prompt": \n'
jsonl blank-only "no prompts" '\n  \n\t\n'
jsonl empty "no prompts" ''
jsonl invalid-utf8 "invalid-utf8.jsonl':1" '"\xff\xfe"\n'
jsonl deep-nesting "deep-nesting.jsonl':1" "$(printf '[%.0s' $(seq 1 300))\n"
run err jsonl-dev-zero "--prompt-file '/dev/zero': is a character device" "$launch" "${b[@]}" \
  --prompt-file /dev/zero
run err jsonl-directory "is a directory" "$launch" "${b[@]}" --prompt-file "$work/dir"
run err jsonl-fifo "is a FIFO" "$launch" "${b[@]}" --prompt-file "$work/fifo"
run err jsonl-missing "cannot open" "$launch" "${b[@]}" --prompt-file "$work/missing.jsonl"
run err jsonl-2gib "larger than the limit" "$launch" "${b[@]}" --prompt-file "$work/sparse-2g"
"$python" -c 'import sys; sys.stdout.write("\"" + "a" * (17 << 20) + "\"\n")' >"$work/long-line.jsonl"
run err jsonl-line-over-16mib "longer than the limit" "$launch" "${b[@]}" --prompt-file \
  "$work/long-line.jsonl"

# --- receipts: validate and verify ----------------------------------------------------------------
validate() {  # validate ID NEEDLE FILE
  run rerr "validate-$1" "$2" "$launch" validate "$3"
}
verify() {  # verify ID NEEDLE FILE
  run rerr "verify-$1" "$2" "$launch" verify "$3" "${b[@]}"
}
validate dev-zero "/dev/zero" /dev/zero
validate directory "$work/dir': is a directory" "$work/dir"
validate fifo "$work/fifo': is a FIFO" "$work/fifo"
validate 2gib "sparse-2g" "$work/sparse-2g"
validate missing "cannot open" "$work/none.json"
for name in temp-nan temp-inf temp-neg; do
  validate "$name" temperature "$r/r-$name.json"
  verify "$name" temperature "$r/r-$name.json"
done
for name in topp-0 topp-2 topp-nan; do
  validate "$name" top_p "$r/r-$name.json"
  verify "$name" top_p "$r/r-$name.json"
done
validate topk-negative top_k "$r/r-topk-neg.json"
validate seed-negative seed "$r/r-seed-neg.json"
validate seed-leading-zeros seed "$r/r-seed-zeros.json"
validate duplicate-text "'text'" "$r/r-dup-text.json"
verify duplicate-text "'text'" "$r/r-dup-text.json"
validate duplicate-format "'format'" "$r/r-dup-format.json"
validate unknown-key extra "$r/r-unknown-key.json"
validate output-id-2p31 output_ids "$r/r-output-2p31.json"
validate output-empty output_ids "$r/r-output-empty.json"
validate steps-short step_logits_sha256 "$r/r-steps-short.json"
validate deep-nesting r-deep.json "$r/r-deep.json"
validate truncated r-truncated.json "$r/r-truncated.json"
validate not-object r-not-object.json "$r/r-not-object.json"
run rerr verify-max-context-huge "max_context" "$launch" verify "$r/r-max-context-huge.json" "${b[@]}"
if { [ -z "$only" ] || [[ verify-max-context-huge =~ $only ]]; } &&
  grep -qF -- "--max-context" "$work/err"; then
  report_failure verify-max-context-names-flag "names --max-context, a flag the user never passed" \
    verify "$r/r-max-context-huge.json"
fi
verify dev-zero "/dev/zero" /dev/zero
verify fifo "$work/fifo': is a FIFO" "$work/fifo"
run ok validate-informational-plan-layer-1e9 "" "$launch" validate "$r/ok-plan-layer-1e9.json"
run ok verify-informational-plan-layer-1e9 "" "$launch" verify "$r/ok-plan-layer-1e9.json" "${b[@]}"
run err validate-two-receipts "unexpected argument" "$launch" validate "$work/receipt.json" \
  "$work/receipt.json"
run err validate-unknown-option "unknown option '--bogus'" "$launch" validate --bogus \
  "$work/receipt.json"

# --- GGUF files (tests/models/gguf_test.cpp has the full table) ------------------------------
gg="$work/gguf"
mkdir -p "$gg"
printf 'GGUF\003\000\000' >"$gg/short.gguf"
printf 'GGML\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$gg/magic.gguf"
printf 'GGUF\003\000\000\000\377\377\377\377\377\377\377\377\000\000\000\000\000\000\000\000' >"$gg/count.gguf"
mkfifo "$gg/fifo.gguf"
run err gguf-truncated "short.gguf" "$launch" --model "$gg/short.gguf" "${g[@]}"
run err gguf-bad-magic "no 'GGUF' magic" "$launch" --model "$gg/magic.gguf" "${g[@]}"
run err gguf-huge-tensor-count "tensor count" "$launch" --model "$gg/count.gguf" "${g[@]}"
run err gguf-fifo "fifo.gguf" "$launch" --model "$gg/fifo.gguf" "${g[@]}"
run err gguf-prompt-text "tokenizer" "$launch" --model "$source_dir/tests/fuzz/corpus/gguf/llama_q8_0_tied.gguf" \
  --cpu-only --prompt-text hi

# --- chat templates (--chat): chat_template.jinja and tokenizer_config.json --------------------
chat() {  # chat KIND ID DIR NEEDLE
  run "$1" "$2" "$4" "$launch" --model "$m/$3" --cpu-only --chat hi --max-new-tokens 2
}
chat ok chat-control chat-ok ""
chat err chat-template-fifo chat-jinja-fifo "chat_template.jinja': is a FIFO"
chat err chat-template-directory chat-jinja-dir "chat_template.jinja': is a directory"
chat err chat-template-dev-zero chat-jinja-zero "chat_template.jinja': is a character device"
chat err chat-template-2gib chat-jinja-huge "chat_template.jinja"
chat err chat-config-fifo chat-config-fifo "tokenizer_config.json': is a FIFO"
chat err chat-config-directory chat-config-dir "tokenizer_config.json': is a directory"
chat err chat-config-dev-zero chat-config-zero "tokenizer_config.json': is a character device"
chat err chat-config-2gib chat-config-huge "tokenizer_config.json"
chat err chat-config-duplicate-key chat-config-dup-key "chat_template"
chat err chat-config-array chat-config-array "tokenizer_config.json: not a JSON object"
chat err chat-config-template-number chat-config-template-number "chat_template must be a string"
chat err chat-config-no-default chat-config-no-default "no template named \"default\""
chat err chat-template-syntax chat-syntax "chat_template.jinja:1:"
chat err chat-template-include chat-unknown-tag "the 'include' tag is not supported"
chat err chat-template-raise chat-raise "no system role here"
# The step limit (5M steps, about 1 s of CPU, 4 s under ASan) is tested through the library
# (models_chat_template_test): here it would ride close to the per-case timeout on a busy machine.
chat err chat-template-output-limit chat-output "chat_template.jinja"
chat err chat-template-nesting chat-nesting "nests deeper than"
chat err chat-template-macro-recursion chat-macro-recursion "chat_template.jinja"

# --- MPI runs ---------------------------------------------------------------------------------
if [ -n "$mpiexec" ]; then
  mpirun=("$mpiexec" --oversubscribe --allow-run-as-root --bind-to none)
  q=("${b[@]}" --prompt-text hi --max-new-tokens 2 --n-partitions 2 --comm-timeout 60)
  run mpi mpi-plan-on-rank-0 "rank 0 left before the run began" "${mpirun[@]}" \
    -n 1 "$launch" "${q[@]}" --plan : -n 1 "$launch" "${q[@]}"
  run mpi mpi-version-on-rank-1 "rank 1 left before the run began" "${mpirun[@]}" \
    -n 1 "$launch" "${q[@]}" : -n 1 "$launch" "${q[@]}" --version
  run mpi mpi-validate-on-rank-0 "rank 0 left before the run began (it runs \`ree-launch validate\`" \
    "${mpirun[@]}" -n 1 "$launch" validate "$work/receipt.json" : -n 1 "$launch" "${q[@]}"
  run mpi mpi-flag-error-on-rank-1 "rank 1: --top-k '-1'" "${mpirun[@]}" \
    -n 1 "$launch" "${q[@]}" : -n 1 "$launch" "${q[@]}" --top-k -1
  run mpi mpi-fifo-prompt-on-rank-1 "rank 1: --prompt-file" "${mpirun[@]}" \
    -n 1 "$launch" "${q[@]}" : -n 1 "$launch" "${b[@]}" --n-partitions 2 --comm-timeout 60 \
    --prompt-file "$work/fifo"
  run mpi mpi-world-size "does not match the MPI world size 2" "${mpirun[@]}" -n 2 "$launch" \
    "${b[@]}" --prompt-text hi --n-partitions 3
  run mpi mpi-comm-timeout-nan "--comm-timeout 'nan'" "${mpirun[@]}" -n 2 "$launch" "${q[@]/60/nan}"
  run mpi mpi-hostile-config "num_hidden_layers" "${mpirun[@]}" -n 2 "$launch" --model \
    "$m/cfg-layers-2p40" "${g[@]}" --n-partitions 2
  run mpi mpi-other-model-on-rank-1 "rank 1 was given a different model" "${mpirun[@]}" \
    -n 1 "$launch" --model "$base" "${g[@]}" --n-partitions 2 : \
    -n 1 "$launch" --model "$m/cfg-eps-double" "${g[@]}" --n-partitions 2
  run mpi mpi-nan-weights "model.embed_tokens.weight" "${mpirun[@]}" -n 2 "$launch" --model \
    "$m/st-nan-embed" "${g[@]}" --n-partitions 2
fi

echo "hostile input: $passed passed, $failed failed"
[ "$failed" -eq 0 ] || echo "failed: ${failed_ids[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
