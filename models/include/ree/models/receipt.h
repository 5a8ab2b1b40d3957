// Receipts: a run's claim (model, prompt, sampling, outputs, the SHA-256 of every step's logits and
// optionally of every layer's activations), written as JSON whose bytes and hashes are specified in
// docs/receipt.md ("ree-receipt/1"), so anyone can recompute them with standard tools.
//
// validateReceiptFile() checks a receipt's structure and internal hashes without running anything;
// verifyReceiptFile() re-executes it: each request's prompt and generated tokens run as ONE prefill
// (Engine::replay), every step's logits are hashed and its token re-drawn, and the first divergent
// step (and layer, and the stage that owned it) is reported.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ree/kernels/status.h"
#include "ree/models/engine.h"

namespace ree {

// What identifies a model independently of how its files are laid out (docs/receipt.md).
struct ModelIdentity {
  std::string config_sha256;     // raw bytes of config.json
  std::string tokenizer_sha256;  // raw bytes of tokenizer.json; "" when there is none
  std::string weights_sha256;    // over tensors in name order (independent of sharding)
  std::string weights_kind;      // "safetensors" or "synthetic"
};

// `model` as --model takes it: a directory, builtin:NAME or synthetic:DIR. Hashes every tensor's
// bytes (in parallel); a checkpoint of N GB reads N GB.
Status computeModelIdentity(const std::string& model, ModelIdentity* out);

// Everything about a run that a receipt records besides the requests.
struct ReceiptRunInfo {
  std::string model;  // --model as given (informational)
  ModelIdentity identity;
  EngineOptions options;
  int max_context = 0;                     // in use (Engine::maxContext())
  std::vector<partitioner::Stage> plan;    // informational
  std::vector<std::string> stage_devices;  // informational
};

Status writeReceipt(const std::string& path, const ReceiptRunInfo& run,
                    const std::vector<GenerationRequest>& requests,
                    const std::vector<GenerationResult>& results);

// Structure and internal hashes (receipt hash, output ids hash, logits chain, counts). On success
// `summary` says what was checked; on failure the error names the file and the field.
Status validateReceiptFile(const std::string& path, std::string* summary);

struct VerifyOptions {
  std::string model;  // the model to re-execute with (--model)
  Device device = Device::cpu();
  int n_partitions = 1;
  std::vector<int64_t> partition_layers;
  std::vector<Device> stage_devices;
};

enum class Verdict { kVerified = 0, kMismatch = 1, kCouldNotVerify = 2 };

struct VerifyReport {
  Verdict verdict = Verdict::kCouldNotVerify;
  std::string summary;  // one line
  // First divergence (kMismatch): -1 where not applicable.
  int64_t request = -1;
  int64_t step = -1;
  int64_t layer = -1;
  int64_t stage = -1;  // the stage that owned `layer` in the receipt's plan
  std::string
      field;  // what differed: "model.weights_sha256", "output_ids", "step_logits_sha256", ...
  int64_t requests_checked = 0;
  int64_t steps_checked = 0;
  double seconds = 0.0;  // re-execution time (replays only)
  std::string json;      // the report as one JSON object
};

// Returns kSuccess whenever a verdict was reached (verified or mismatch; see report->verdict);
// an error status (and kCouldNotVerify) when the receipt or the model cannot be used.
Status verifyReceiptFile(const std::string& path, const VerifyOptions& options,
                         VerifyReport* report);

}  // namespace ree
