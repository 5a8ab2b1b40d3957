// Receipts for tests: the receipt of a generation run on the CPU, as ree-launch writes one.
#pragma once

#include <string>
#include <vector>

#include "ree/models/engine.h"
#include "ree/models/model_identity.h"
#include "ree/models/receipt.h"
#include "test_util.h"

namespace ree::test {

// The receipt of `results` (of `requests` on `engine`, every stage on the CPU) for the model
// `model` as given, with its identity `identity`.
inline Receipt cpuReceipt(const Engine& engine, const std::string& model,
                          const ModelIdentity& identity,
                          const std::vector<GenerationRequest>& requests,
                          const std::vector<GenerationResult>& results) {
  ReceiptRunInfo run;
  run.model = model;
  run.identity = identity;
  run.options = engine.options();
  run.max_context = engine.maxContext();
  run.plan = engine.plan();
  run.stage_devices.assign(run.plan.size(), "cpu");
  Receipt receipt;
  EXPECT_EQ(makeReceipt(run, requests, results, &receipt), Status::kSuccess) << lastErrorMessage();
  return receipt;
}

}  // namespace ree::test
