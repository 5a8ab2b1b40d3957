#!/usr/bin/env bash
# Receipts through the real ree-launch binary (docs/receipt.md): --receipt-path (with and without
# --trace-hashes, 2 prompts, greedy and sampled), `validate` and `verify` exit codes (0 / 1 / 2),
# the verdict line, --json, a tampered-and-rehashed receipt naming the first divergent step and
# layer, another model's weights, config, eos list or chat template ("could not verify"),
# malformed receipts, bad flags, the receipts of earlier releases (tests/launcher/receipts/, with
# the note that they predate the binding of the eos list and chat template), and the independent
# Python recomputation of the receipt hash.
#   receipt_cli.sh PATH/TO/ree-launch WORK_DIR [PYTHON SOURCE_DIR]
set -u
launch="$1"
work="$2"
python="${3:-}"
source_dir="${4:-}"
rm -rf "$work"
mkdir -p "$work"
export REE_CACHE_DIR="$work/cache"
failures=0
passes=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# expect CODE NEEDLE CMD...: exit status CODE, NEEDLE in stdout+stderr, no crash.
expect() {
  local code="$1" needle="$2"
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ "$rc" -ne "$code" ] || ! cat "$work/out" "$work/err" | grep -qF -- "$needle"; then
    fail "(rc=$rc, wanted $code and '$needle'): $*"
    sed 's/^/  | /' "$work/out" "$work/err" | head -20
  else
    passes=$((passes + 1))
  fi
}

printf '%s\n' '{"prompt": "Hello receipts"}' '{"prompt": "Z\u00fcrich \ud83d\ude42"}' >"$work/prompts.jsonl"
gen=("$launch" --model builtin:tiny-llama --cpu-only --prompt-file "$work/prompts.jsonl"
  --max-new-tokens 9 --threads 2)
expect 0 "receipt written" "${gen[@]}" --receipt-path "$work/greedy.json"
expect 0 "receipt written" "${gen[@]}" --temperature 0.8 --top-p 0.9 --seed 77 --trace-hashes \
  --n-partitions 2 --receipt-path "$work/traced.json"

v=("$launch" verify)
m=(--model builtin:tiny-llama --cpu-only)
expect 0 "valid: 2 request(s), 18 step(s)" "$launch" validate "$work/greedy.json"
expect 0 "layer hashes" "$launch" validate "$work/traced.json"
expect 0 "verified: 2 request(s), 18 step(s)" "${v[@]}" "$work/greedy.json" "${m[@]}"
expect 0 "verified: 2 request(s)" "${v[@]}" "$work/traced.json" "${m[@]}"
expect 0 "verified: 2 request(s)" "${v[@]}" "$work/traced.json" "${m[@]}" --n-partitions 4
expect 0 "verified" "${v[@]}" "$work/greedy.json" "${m[@]}" --n-partitions 2 --partition-layers 3,1
expect 0 '"verdict":"verified"' "${v[@]}" "$work/traced.json" "${m[@]}" --json
expect 0 '"verdict":"valid"' "$launch" validate "$work/greedy.json" --json

# repops-3 (one exponent per row): the receipt names it, and verify re-executes with it.
expect 0 "receipt written" "${gen[@]}" --repops-spec repops-3 --temperature 0.8 --top-p 0.9 \
  --seed 77 --n-partitions 2 --receipt-path "$work/repops3.json"
expect 0 "(repops-3)" "$launch" validate "$work/repops3.json"
expect 0 "verified: 2 request(s)" "${v[@]}" "$work/repops3.json" "${m[@]}"
expect 0 "verified: 2 request(s)" "${v[@]}" "$work/repops3.json" "${m[@]}" --n-partitions 3

# Receipts written by earlier releases (tests/launcher/receipts/README.md) verify with this one,
# bit for bit, each with the RepOps spec it names.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
old_receipts=("$here"/receipts/*.json)
[ "${#old_receipts[@]}" -ge 3 ] || fail "expected the receipts of earlier releases in $here/receipts"
for old in "${old_receipts[@]}"; do
  expect 0 "verified: 3 request(s)" "${v[@]}" "$old" "${m[@]}"
  expect 0 "verified: 3 request(s)" "${v[@]}" "$old" "${m[@]}" --n-partitions 3
done
# They predate the binding of generation_config.json and the chat template files: a note says so.
expect 0 "model.generation_config_sha256 is absent" "${v[@]}" "${old_receipts[0]}" "${m[@]}"
expect 0 "model.chat_template_sha256 is absent" "${v[@]}" "${old_receipts[0]}" "${m[@]}"
expect 0 "(repops-2)" "$launch" validate "$here/receipts/ree-0.3.0-repops-2-sampled-traced-n2.json"
expect 0 "(repops-3)" "$launch" validate "$here/receipts/ree-0.3.0-repops-3-sampled-traced-n2.json"

# Independent recomputation of every internal hash.
if [ -n "$python" ] && [ -n "$source_dir" ]; then
  for r in greedy traced; do
    expect 0 '"ok": true' "$python" "$source_dir/scripts/reference/receipt_reference.py" receipt \
      "$work/$r.json"
  done
fi

# Tampering, via a small JSON edit (python's json keeps the format; jq is not required).
edit() {  # edit IN OUT PYTHON-EXPRESSION-ON-r [rehash]
  "$python" - "$1" "$2" "$3" "${4:-}" "$source_dir/scripts/reference" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[5])
import receipt_reference as ref
r = json.load(open(sys.argv[1], encoding="utf-8"))
exec(sys.argv[3])
if sys.argv[4] == "rehash":
    for q in r["requests"]:
        q["output_ids_sha256"] = ref.ids_sha256(q["output_ids"])
        q["prompt_ids_sha256"] = ref.ids_sha256(q["prompt_ids"])
        q["logits_chain_sha256"] = ref.logits_chain(q["prompt_ids_sha256"], q["step_logits_sha256"])
    body = {k: v for k, v in r.items() if k != "receipt_sha256"}
    r["receipt_sha256"] = ref.sha256_hex(ref.canonical(body))
json.dump(r, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False, indent=1)
PY
}
if [ -n "$python" ] && [ -n "$source_dir" ]; then
  edit "$work/greedy.json" "$work/t1.json" 'r["requests"][0]["output_ids"][2] += 1'
  expect 1 "requests[0].output_ids_sha256: does not match" "$launch" validate "$work/t1.json"
  expect 1 "mismatch: the receipt is inconsistent" "${v[@]}" "$work/t1.json" "${m[@]}"
  edit "$work/greedy.json" "$work/t2.json" 'r["requests"][1]["text"] += "x"'
  expect 1 "receipt_sha256: does not match" "$launch" validate "$work/t2.json"
  edit "$work/traced.json" "$work/t3.json" 'r["requests"][1]["sampling"]["seed"] = "78"'
  expect 1 "receipt_sha256" "$launch" validate "$work/t3.json"
  # Changed and re-hashed: validate passes, verify names the step (and layer when traced).
  edit "$work/greedy.json" "$work/t4.json" 'r["requests"][0]["output_ids"][5] = (r["requests"][0]["output_ids"][5] + 1) % 200' rehash
  expect 0 "valid" "$launch" validate "$work/t4.json"
  expect 1 "mismatch: request 0 step 5" "${v[@]}" "$work/t4.json" "${m[@]}"
  expect 1 '"step":5' "${v[@]}" "$work/t4.json" "${m[@]}" --json
  edit "$work/traced.json" "$work/t5.json" 'r["requests"][1]["step_layer_sha256"][4][2] = "0" * 64' rehash
  expect 1 "mismatch: request 1 step 4 (first divergent layer 2, stage 1)" "${v[@]}" "$work/t5.json" "${m[@]}"
  edit "$work/traced.json" "$work/t6.json" 'r["requests"][1]["sampling"]["seed"] = "78"' rehash
  expect 1 "mismatch: request 1 step" "${v[@]}" "$work/t6.json" "${m[@]}"
  # A repops-3 receipt relabelled repops-1: inconsistent as it stands; re-hashed, it is valid
  # but re-executing under repops-1 diverges at the first step.
  edit "$work/repops3.json" "$work/t7.json" 'r["runtime"]["repops_spec"] = "repops-1"'
  expect 1 "receipt_sha256: does not match" "$launch" validate "$work/t7.json"
  expect 1 "mismatch: the receipt is inconsistent" "${v[@]}" "$work/t7.json" "${m[@]}"
  edit "$work/repops3.json" "$work/t8.json" 'r["runtime"]["repops_spec"] = "repops-1"' rehash
  expect 0 "valid" "$launch" validate "$work/t8.json"
  expect 1 "mismatch: request 0 step 0" "${v[@]}" "$work/t8.json" "${m[@]}"

  # Another model: a weight byte, or the config's bytes.
  model_dir="$(dirname "$(find "$REE_CACHE_DIR" -name config.json | head -1)")"
  cp -r "$model_dir" "$work/flipped"
  "$python" - "$work/flipped/model.safetensors" <<'PY'
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    f.seek(8 + n + 100)
    b = f.read(1)
    f.seek(8 + n + 100)
    f.write(bytes([b[0] ^ 1]))
PY
  expect 2 "could not verify: model identity differs: the weights" "${v[@]}" "$work/greedy.json" \
    --model "$work/flipped" --cpu-only
  cp -r "$model_dir" "$work/config"
  echo >>"$work/config/config.json"
  expect 2 "model.config_sha256" "${v[@]}" "$work/greedy.json" --model "$work/config" --cpu-only
  expect 2 '"verdict":"could-not-verify"' "${v[@]}" "$work/greedy.json" --model "$work/config" \
    --cpu-only --json
  # Another eos list or chat template (docs/receipt.md, "Model identity"): the field is named.
  cp -r "$model_dir" "$work/eos"
  printf '{"bos_token_id": 256, "eos_token_id": [257, 3]}' >"$work/eos/generation_config.json"
  expect 2 "model.generation_config_sha256" "${v[@]}" "$work/greedy.json" --model "$work/eos" --cpu-only
  cp -r "$model_dir" "$work/chat"
  printf '{{ messages[0]["content"] }}' >"$work/chat/chat_template.jinja"
  expect 2 "model.chat_template_sha256" "${v[@]}" "$work/greedy.json" --model "$work/chat" --cpu-only
fi

# Hostile receipts (issue 31): a forged twin of a key, sampling no run accepts (re-hashed),
# informational fields, values verify takes from the receipt, files that are not regular files.
if [ -n "$python" ] && [ -n "$source_dir" ]; then
  sed '0,/"text":/s/"text":/"text": "FORGED", "text":/' "$work/greedy.json" >"$work/dup.json"
  expect 2 "repeats the key 'text' in the object at \$.requests[0]" "$launch" validate "$work/dup.json"
  expect 2 "repeats the key 'text'" "${v[@]}" "$work/dup.json" "${m[@]}"
  edit "$work/traced.json" "$work/nan.json" 'r["requests"][1]["sampling"].update(temperature="nan", temperature_f32="7fc00000")' rehash
  expect 2 "requests[1].sampling.temperature must be in" "$launch" validate "$work/nan.json"
  expect 2 "no run could have produced this receipt" "${v[@]}" "$work/nan.json" "${m[@]}"
  edit "$work/traced.json" "$work/top_p.json" 'r["requests"][1]["sampling"].update(top_p="2", top_p_f32="40000000")' rehash
  expect 2 "requests[1].sampling.top_p must be in (0, 1]" "$launch" validate "$work/top_p.json"
  edit "$work/traced.json" "$work/plan.json" 'r["execution"]["plan"][1]["end_layer"] = 10**9' rehash
  expect 0 "valid" "$launch" validate "$work/plan.json"
  expect 0 "verified" "${v[@]}" "$work/plan.json" "${m[@]}"
  edit "$work/greedy.json" "$work/long.json" 'q = r["requests"][0]; q["prompt_text"] = None; q["prompt_ids"] = q["prompt_ids"] * 300; r["run"]["max_context"] = 8192' rehash
  expect 0 "valid" "$launch" validate "$work/long.json"
  expect 2 "the context of the receipt's longest request (requests[0]" "${v[@]}" "$work/long.json" "${m[@]}"
  if grep -q -- "--max-context" "$work/err"; then fail "verify named --max-context, a flag never passed"; fi
fi
mkdir -p "$work/dir.json"
mkfifo "$work/fifo.json"
expect 2 "is a directory, not a regular file" "$launch" validate "$work/dir.json"
expect 2 "is a FIFO, not a regular file" timeout 10 "$launch" validate "$work/fifo.json"
expect 2 "is a character device, not a regular file" "$launch" validate /dev/zero
expect 2 "is a FIFO, not a regular file" timeout 10 "${v[@]}" "$work/fifo.json" "${m[@]}"

# Malformed receipts and bad flags: exit 2, the field or flag named.
head -c 300 "$work/greedy.json" >"$work/truncated.json"
expect 2 "truncated.json: (file): not valid JSON" "$launch" validate "$work/truncated.json"
expect 2 "truncated.json: (file): not valid JSON" "${v[@]}" "$work/truncated.json" "${m[@]}"
sed 's/"ree-receipt\/1"/"ree-receipt\/9"/' "$work/greedy.json" >"$work/version.json"
expect 2 "format: 'ree-receipt/9' is not ree-receipt/1" "$launch" validate "$work/version.json"
sed '0,/"text"/s/"text"/"txet"/' "$work/greedy.json" >"$work/missing.json"
expect 2 "requests[0].text: missing" "$launch" validate "$work/missing.json"
expect 2 "cannot open" "$launch" validate "$work/none.json"
expect 2 "give the receipt file" "$launch" validate
expect 2 "unknown option '--bogus'" "$launch" validate "$work/greedy.json" --bogus
expect 2 "--model is required" "${v[@]}" "$work/greedy.json"
expect 2 "give the receipt file" "${v[@]}" --model builtin:tiny-llama
expect 2 "--n-partitions must be >= 1" "${v[@]}" "$work/greedy.json" "${m[@]}" --n-partitions 0
expect 2 "--cpu-only contradicts --device" "${v[@]}" "$work/greedy.json" "${m[@]}" --device cuda
expect 2 "no config.json" "${v[@]}" "$work/greedy.json" --model "$work/nowhere" --cpu-only
expect 0 "Exit: 0 verified, 1 mismatch, 2 could not verify" "${v[@]}" --help
expect 0 "usage: ree-launch validate" "$launch" validate --help

echo "receipt CLI: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
