// ree-launch's receipt subcommands (`validate`, `verify`, docs/receipt.md) and the receipt of a
// generation run (--receipt-path).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/engine.h"

namespace ree::launcher {

// Makes the engine a verification runs on. `options` arrives filled from the receipt and the
// flags (operation set, weight dtype, max_batch 1, max_context, device, pipeline layout); the
// factory may add what it owns (e.g. a transport) before creating the engine.
using EngineFactory = std::function<Status(EngineOptions& options, std::unique_ptr<Engine>* out)>;

// Engine::create.
EngineFactory defaultEngineFactory();

// ree-launch validate RECEIPT [--json]  (argv[0] == "validate")
// Exit: 0 valid, 1 internal hashes inconsistent, 2 unreadable or malformed.
int validateCommand(int argc, const char* const* argv);

// ree-launch verify RECEIPT --model DIR [--cpu-only | --device D] [--n-partitions N]
//     [--partition-layers L] [--stage-devices D,...] [--threads N] [--json]  (argv[0] == "verify")
// Exit: 0 verified, 1 mismatch (the receipt's claim is false for its model), 2 could not verify
// (unreadable or malformed receipt, model missing or not the receipt's model, engine failure).
int verifyCommand(int argc, const char* const* argv,
                  const EngineFactory& make_engine = defaultEngineFactory());

// Writes the receipt of a finished generation (rank 0 of a pipeline; after shutdown() is fine):
// hashes the model's files (options.model), takes the plan from `engine`.
Status writeRunReceipt(const std::string& path, const EngineOptions& options, const Engine& engine,
                       const std::vector<GenerationRequest>& requests,
                       const std::vector<GenerationResult>& results);

}  // namespace ree::launcher
