// ree-launch's receipt subcommands (`validate`, `verify`) and the receipt of a generation run.
#pragma once

#include <vector>

#include "ree/kernels/status.h"
#include "ree/models/engine.h"

namespace ree::launcher {

// ree-launch validate RECEIPT: exit 0 valid, 1 inconsistent hashes, 2 unreadable or malformed.
int validateCommand(int argc, const char* const* argv);

// ree-launch verify RECEIPT --model DIR [...]: exit 0 verified, 1 mismatch, 2 could not verify.
int verifyCommand(int argc, const char* const* argv);

// Writes the receipt of a finished generation (rank 0 of a pipeline).
Status writeRunReceipt(const std::string& path, const EngineOptions& options, const Engine& engine,
                       const std::vector<GenerationRequest>& requests,
                       const std::vector<GenerationResult>& results);

}  // namespace ree::launcher
