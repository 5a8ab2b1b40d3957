#!/usr/bin/env bash
# --chat and --system through the real ree-launch binary (docs/usage.md, docs/chat-templates.md):
# the prompt is the conversation rendered with the model's chat template (here a copy of
# builtin:tiny-llama given one in tokenizer_config.json), tokenized without adding special tokens
# again, so the run equals --prompt-text of the rendered text with --no-special-tokens; a model
# without a template, a template that raises, and misused flags give one-line errors.
#   chat_cli.sh PATH/TO/ree-launch WORK_DIR PYTHON
set -u
launch="$1"
work="$2"
python="$3"
rm -rf "$work"
mkdir -p "$work"
export REE_CACHE_DIR="$work/cache"
failures=0
passes=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# expect CODE NEEDLE CMD...: exit status CODE (any non-zero for 1), NEEDLE in stdout+stderr.
expect() {
  local code="$1" needle="$2"
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  local ok=1
  if [ "$code" -eq 0 ]; then [ "$rc" -eq 0 ] || ok=0; else { [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; } || ok=0; fi
  if [ "$ok" -eq 0 ] || ! cat "$work/out" "$work/err" | grep -qF -- "$needle"; then
    fail "(rc=$rc, wanted $code and '$needle'): $*"
    sed 's/^/  | /' "$work/out" "$work/err" | head -20
  elif [ "$code" -ne 0 ] && [ "$(wc -l <"$work/err")" -ne 1 ]; then
    fail "(error of $(wc -l <"$work/err") lines): $*"
  else
    passes=$((passes + 1))
  fi
}

run=(--cpu-only --max-new-tokens 6 --json)
expect 0 '"prompt_ids"' "$launch" --model builtin:tiny-llama "${run[@]}" --prompt-text hi
source_dir="$(dirname "$(find "$REE_CACHE_DIR" -name tokenizer_config.json | head -1)")"
model="$work/chat-model"
cp -r "$source_dir" "$model"
"$python" - "$model/tokenizer_config.json" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
config["chat_template"] = ("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content | trim }}"
                           "{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
json.dump(config, open(path, "w"))
PY
rendered=$'<|begin_of_text|><|system|>\nBe brief.<|end_of_text|>\n<|user|>\nHello there!<|end_of_text|>\n<|assistant|>\n'
expect 0 '"prompt_ids"' "$launch" --model "$model" "${run[@]}" --system " Be brief. " --chat "Hello there! "
cp "$work/out" "$work/chat.json"
expect 0 '"prompt_ids"' "$launch" --model "$model" "${run[@]}" --no-special-tokens --prompt-text "$rendered"
# The same prompt ids and output (timings aside).
strip() { "$python" -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline()); d.pop("timing"); d.pop("model"); print(json.dumps(d, sort_keys=True))' "$1"; }
if [ "$(strip "$work/chat.json")" != "$(strip "$work/out")" ]; then
  fail "--chat differs from --prompt-text of the rendered template"
  diff <(strip "$work/chat.json") <(strip "$work/out") | head
else
  passes=$((passes + 1))
fi

expect 1 "has no chat template" "$launch" --model builtin:tiny-llama "${run[@]}" --chat hi
expect 1 "--system needs --chat" "$launch" --model "$model" "${run[@]}" --prompt-text hi --system s
expect 1 "give exactly one of" "$launch" --model "$model" "${run[@]}" --prompt-text hi --chat hi
"$python" - "$model/tokenizer_config.json" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
config["chat_template"] = "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
json.dump(config, open(path, "w"))
PY
expect 1 "raise_exception: System role not supported" "$launch" --model "$model" "${run[@]}" --system s --chat hi

echo "chat_cli: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
