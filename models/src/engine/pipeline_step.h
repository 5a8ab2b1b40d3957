// One forward step of the model as it travels through a pipeline's stages, and its wire format.
//
// The first stage builds a StepWork (tokens, the step's sequences, which rows need logits and how
// each is sampled); every stage runs its layers over the activations; the last stage computes the
// logits rows, hashes and samples them and returns a StepOutput to the first stage. In a
// multi-process pipeline the header (everything but the token ids) travels as a host message
// ahead of the activation tensor; this file defines that message's bytes (little-endian,
// fixed-width fields) so every rank reads what every other wrote, whatever the host.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/engine.h"
#include "ree/runtime/operation_set.h"

namespace ree::models {

using Digest = std::array<uint8_t, 32>;

// How one logits row is turned into a token: the sampler's key and parameters.
struct RowSampling {
  uint64_t request = 0;
  uint64_t step = 0;
  SamplingParams sampling;
  int top_logprobs = -1;  // GenerationRequest::top_logprobs (single process: not on the wire)
};

struct StepWork {
  uint64_t id = 0;           // identifies the step (micro-batch) in the result stream
  std::vector<int32_t> ids;  // token ids; the first stage only, never sent
  // Decode lookahead (single process): no `ids`; the step's tokens are those that step
  // `ids_of_step` (queued, all rows greedy, one row per token here) selects on the device.
  std::optional<uint64_t> ids_of_step;
  StepBatch batch;                   // the step's sequences (positions derived by finalize())
  std::vector<int32_t> logits_rows;  // activation rows that need logits, in output order
  std::vector<RowSampling> rows;     // one per logits row
  bool trace = false;                // hash every layer's output
  // With trace: row ranges [end[g-1], end[g]) hashed together (end[-1] = 0).
  std::vector<int32_t> trace_group_ends;
  // With trace: digests of the layers run so far, [layer][group], filled stage by stage.
  std::vector<std::vector<Digest>> layer_digests;
};

struct StepOutput {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // one per logits row
  // SHA-256 of each logits row (fp32 bytes). Computed off the critical path: empty in the tokens
  // message; the last stage sends them in a digests message (encodeStepDigests) after it.
  std::vector<Digest> logits_digests;
  std::vector<std::vector<Digest>> layer_digests;  // [layer][group], all layers
  // One per row when a row asked for log-probabilities (single process: not on the wire).
  std::vector<TokenLogprobs> logprobs;
};

enum class StepMessageKind : uint32_t { kStep = 1, kShutdown = 2 };

// Serialisation of StepWork (without ids) and StepOutput; parse errors name the field.
std::vector<uint8_t> encodeStepHeader(const StepWork& work);
std::vector<uint8_t> encodeShutdown();
// kind receives kStep or kShutdown; `work` is filled for kStep (positions finalised).
Status decodeStepHeader(const std::vector<uint8_t>& bytes, StepMessageKind* kind, StepWork* work);
std::vector<uint8_t> encodeStepOutput(const StepOutput& output);
Status decodeStepOutput(const std::vector<uint8_t>& bytes, StepOutput* output);
// The logits digests of step `id`, sent by the last stage after the step's tokens.
std::vector<uint8_t> encodeStepDigests(uint64_t id, const std::vector<Digest>& digests);
Status decodeStepDigests(const std::vector<uint8_t>& bytes, uint64_t* id,
                         std::vector<Digest>* digests);

std::string digestHex(const Digest& digest);
Digest sha256Digest(const void* data, size_t bytes);

}  // namespace ree::models
