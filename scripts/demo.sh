#!/usr/bin/env bash
# The main job on the embedded default: sets everything up, builds, and generates text with the
# built-in model (RANDOM weights generated from a seed: the text is meaningless) on the
# reproducible operation set, twice (1 and all CPU threads), and shows that both runs produced the
# same output ids hash. Extra arguments go to ree-launch (e.g. --prompt-text "..." or --model DIR).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh" >/dev/null
"$repo/scripts/build.sh" >/dev/null
launch="${REE_BUILD_DIR:-$repo/build}/launcher/ree-launch"
args=(--model builtin:tiny-llama --prompt-text "Reproducible inference means" --max-new-tokens 48
      --operation-set reproducible --cpu-only "$@")
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
