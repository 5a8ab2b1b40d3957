#!/usr/bin/env bash
# ree-launch on bad input: every case must exit non-zero, print exactly one line on stderr that
# starts with "ree-launch: error:" and names the flag/file/token at fault, and never crash.
#   bad_input.sh PATH/TO/ree-launch WORK_DIR
set -u
launch="$1"
work="$2"
rm -rf "$work"
mkdir -p "$work"
export REE_CACHE_DIR="$work/cache"
failures=0
passes=0
expect_error() {
  local needle="$1"
  shift
  "$launch" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ] || [ "$lines" -ne 1 ] ||
    ! grep -q "^ree-launch: error: " "$work/err" || ! grep -qF -- "$needle" "$work/err"; then
    echo "FAIL (rc=$rc, $lines stderr lines, wanted '$needle'): ree-launch $*"
    cat "$work/err"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

m=(--model builtin:tiny-llama --cpu-only)
expect_error "--model is required" --prompt-text hi
expect_error "no-such-flag" "${m[@]}" --prompt-text hi --no-such-flag
expect_error "--operation-set 'fast'" "${m[@]}" --prompt-text hi --operation-set fast
expect_error "--device 'tpu'" --model builtin:tiny-llama --prompt-text hi --device tpu
expect_error "--cpu-only contradicts --device cuda" "${m[@]}" --prompt-text hi --device cuda
expect_error "--max-new-tokens '0': expected an integer in [1, " "${m[@]}" --prompt-text hi --max-new-tokens 0
expect_error "--top-p '1.5': expected a finite number in (0, 1]" "${m[@]}" --prompt-text hi --top-p 1.5
expect_error "--temperature '-1': expected a finite number in [0, " "${m[@]}" --prompt-text hi --temperature -1
expect_error "--dtype 'int4'" "${m[@]}" --prompt-text hi --dtype int4
expect_error "exactly one of --prompt-text" "${m[@]}"
expect_error "exactly one of --prompt-text" "${m[@]}" --prompt-text hi --prompt-ids 1,2
expect_error "--prompt-ids '1,x,3': item 2 'x' is not a token id" "${m[@]}" --prompt-ids 1,x,3
expect_error "outside the vocabulary" "${m[@]}" --prompt-ids 1,2,999999
expect_error "--prompt-file '$work/missing.jsonl': cannot open" "${m[@]}" --prompt-file "$work/missing.jsonl"
echo '{"prompt": 3}' >"$work/bad.jsonl"
expect_error "bad.jsonl':1: \"prompt\" must be a string" "${m[@]}" --prompt-file "$work/bad.jsonl"
echo 'not json' >"$work/bad2.jsonl"
expect_error "bad2.jsonl':1: not valid JSON" "${m[@]}" --prompt-file "$work/bad2.jsonl"
expect_error "/nonexistent/dir" --model /nonexistent/dir --cpu-only --prompt-text hi
expect_error "builtin:nope" --model builtin:nope --cpu-only --prompt-text hi
expect_error "the context holds 8" "${m[@]}" --prompt-ids 1,2,3,4,5,6,7,8,9,10 --max-context 8
# A model directory with a broken config and one with a truncated safetensors file.
mkdir -p "$work/broken"
echo '{"model_type": "llama"' >"$work/broken/config.json"
expect_error "config.json" --model "$work/broken" --cpu-only --prompt-ids 1
cp -r "$REE_CACHE_DIR"/builtin/tiny-llama-* "$work/truncated" 2>/dev/null ||
  { "$launch" "${m[@]}" --prompt-ids 1 --max-new-tokens 1 >/dev/null 2>&1;
    cp -r "$REE_CACHE_DIR"/builtin/tiny-llama-* "$work/truncated"; }
truncate -s 100000 "$work/truncated/model.safetensors"
expect_error "model.safetensors" --model "$work/truncated" --cpu-only --prompt-ids 1
sed -i 's/"llama"/"mamba"/' "$work/truncated/config.json"
expect_error "mamba" --model "$work/truncated" --cpu-only --prompt-ids 1

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
