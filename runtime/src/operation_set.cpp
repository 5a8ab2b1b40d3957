#include "ree/runtime/operation_set.h"

#include <cstdint>

#include "ree/core/text.h"

#include "aten/aten_ops.h"
#include "reproducible_ops.h"

namespace ree {

const char* operationSetName(OperationSetKind kind) {
  switch (kind) {
    case OperationSetKind::kDefault:
      return "default";
    case OperationSetKind::kDeterministic:
      return "deterministic";
    case OperationSetKind::kReproducible:
      return "reproducible";
  }
  return "?";
}

Status parseOperationSet(const std::string& text, OperationSetKind* out) {
  for (OperationSetKind kind : {OperationSetKind::kDefault, OperationSetKind::kDeterministic,
                                OperationSetKind::kReproducible}) {
    if (text == operationSetName(kind)) {
      *out = kind;
      return Status::kSuccess;
    }
  }
  return REE_FAIL(Status::kInvalidArgument,
                  "--operation-set '%s' is not one of default, deterministic, reproducible",
                  text.c_str());
}

Status OperationSet::linearAccumulate(const Tensor& x, const Tensor& weight, const Tensor* bias,
                                      Tensor& acc) {
  REE_CHECK_ARG(acc.rank() >= 1 && acc.dim(-1) == weight.dim(0),
                "linearAccumulate: acc %s does not match weight %s", acc.describe().c_str(),
                weight.describe().c_str());
  Tensor out;
  REE_RETURN_IF_ERROR(Tensor::empty(acc.device(), acc.dtype(), acc.shape(), &out));
  REE_RETURN_IF_ERROR(linear(x, weight, bias, out));
  return addInPlace(acc, out);
}

int64_t OperationSet::fusedProjectionMaxTokens() const {
  return 16;
}

Status OperationSet::prepareLinearWeight(const Tensor&) {
  return Status::kSuccess;
}

bool OperationSet::embedsDeviceIds(const Tensor&) const {
  return false;
}

Status OperationSet::embeddingOfDeviceIds(const int32_t*, int64_t, const Tensor&, Tensor&) {
  return REE_FAIL(Status::kUnsupported, "the %s operation set cannot embed ids in device memory",
                  name());
}

Status OperationSet::copyColumns(const Tensor& src, int64_t col_begin, Tensor& dst) {
  return ::ree::copyColumns(src, col_begin, dst);
}

bool OperationSet::capturesGraphs() const {
  return false;
}

Status OperationSet::bindStep(const StepBatch&, const RopeSpec*, const LayerKvCache&, uint64_t*) {
  return REE_FAIL(Status::kUnsupported,
                  "the %s operation set on %s keeps step metadata on the host", name(),
                  device().str().c_str());
}

void OperationSet::unbindStep() {}

bool OperationSet::bindsSteps() const {
  return false;
}

bool OperationSet::graphsPayAt(int64_t) const {
  return capturesGraphs();
}

Status OperationSet::beginGraphCapture() {
  return REE_FAIL(Status::kUnsupported, "the %s operation set on %s does not record graphs", name(),
                  device().str().c_str());
}

Status OperationSet::endGraphCapture(std::unique_ptr<OperationGraph>*) {
  return REE_FAIL(Status::kUnsupported, "the %s operation set on %s does not record graphs", name(),
                  device().str().c_str());
}

Status StepBatch::finalize() {
  int b = batch();
  REE_CHECK_ARG(static_cast<int>(query_offsets.size()) == b + 1 && query_offsets[0] == 0,
                "StepBatch: query_offsets must have batch + 1 = %d entries starting at 0", b + 1);
  if (block_tables.empty() && blocks_per_seq == 0 && !cache_slots.empty()) {
    block_tables = cache_slots;  // one block (slot) per sequence
    blocks_per_seq = 1;
  }
  REE_CHECK_ARG(b == 0 || (blocks_per_seq >= 1 && blocks_per_seq <= INT32_MAX / b &&
                           block_tables.size() == static_cast<size_t>(b) * blocks_per_seq),
                "StepBatch: block_tables must have batch x blocks_per_seq = %d x %d entries "
                "(has %zu)",
                b, blocks_per_seq, block_tables.size());
  if (blocks_per_seq == 1) {
    cache_slots = block_tables;
  } else {
    cache_slots.clear();
  }
  positions.clear();
  for (int s = 0; s < b; ++s) {
    int n = query_offsets[s + 1] - query_offsets[s];
    REE_CHECK_ARG(n >= 0 && cached_lens[s] >= 0,
                  "StepBatch: sequence %d has %d new and %d cached tokens", s, n, cached_lens[s]);
    for (int i = 0; i < n; ++i)
      positions.push_back(cached_lens[s] + i);
  }
  return Status::kSuccess;
}

const char* repOpsSpecName(RepOpsSpec spec) {
  switch (spec) {
    case RepOpsSpec::kRepOps1:
      return "repops-1";
    case RepOpsSpec::kRepOps2:
      return "repops-2";
    case RepOpsSpec::kRepOps3:
      return "repops-3";
  }
  return "repops-1";
}

Status parseRepOpsSpec(const std::string& text, const char* what, RepOpsSpec* out) {
  for (RepOpsSpec spec : {RepOpsSpec::kRepOps1, RepOpsSpec::kRepOps2, RepOpsSpec::kRepOps3}) {
    if (text == repOpsSpecName(spec)) {
      *out = spec;
      return Status::kSuccess;
    }
  }
  return REE_FAIL(Status::kInvalidArgument,
                  "%s: '%s' is not a RepOps spec this release implements (repops-1, repops-2, "
                  "repops-3)",
                  what, printableText(text, 40).c_str());
}

Status createOperationSet(OperationSetKind kind, Device device,
                          std::unique_ptr<OperationSet>* out) {
  return createOperationSet(kind, device, kDefaultRepOpsSpec, out);
}

Status createOperationSet(OperationSetKind kind, Device device, RepOpsSpec spec,
                          std::unique_ptr<OperationSet>* out) {
  REE_CHECK_ARG(out != nullptr, "createOperationSet: out is null");
  if (kind == OperationSetKind::kReproducible) {
    return createReproducibleOperationSet(device, spec, out);
  }
  return createAtenOperationSet(kind, device, out);
}

}  // namespace ree
