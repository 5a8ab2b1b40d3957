#include "engine_resident_bytes.h"

#include "ree/models/architecture.h"
#include "ree/models/gguf_source.h"
#include "ree/runtime/quantized_weight.h"

namespace ree::models {

bool keepsGgufBlocks(const EngineOptions& options, bool fp32_weights) {
  return fp32_weights && options.operation_set == OperationSetKind::kReproducible &&
         options.repops_spec == RepOpsSpec::kRepOps1 && keepQuantizedWeightsEnabled();
}

namespace {

// The bytes `tensor` takes once loaded: its blocks when kept (a 2-D tensor of a block type, as
// GgufSource::quantType and CausalLM::loadMaybeQuantized decide), else elements x weight_bytes.
int64_t residentBytes(const GgufSource& gguf, const ExpectedTensor& tensor, bool keep_blocks,
                      int weight_bytes) {
  repops::QuantType type;
  if (keep_blocks && tensor.shape.size() == 2 && gguf.quantType(tensor.name, &type)) {
    return tensor.shape[0] * quantizedRowBytes(type, tensor.shape[1]);
  }
  int64_t elements = 1;
  for (int64_t d : tensor.shape)
    elements *= d;
  return elements * weight_bytes;
}

}  // namespace

bool ggufResidentNodeBytes(const ModelConfig& config, const Checkpoint& checkpoint,
                           bool keep_blocks, int weight_bytes, std::vector<int64_t>* node_bytes) {
  const auto* gguf = dynamic_cast<const GgufSource*>(&checkpoint.source());
  if (gguf == nullptr) return false;
  const size_t head = static_cast<size_t>(config.num_layers) + 1;
  node_bytes->assign(head + 1, 0);
  const std::string prefix = tensorNamePrefix(config, checkpoint);
  const std::string token_embedding =
      prefix + architectureFacts(config.architecture).names.token_embedding;
  // A model's config is within model_limits.h and its tensors' shapes come from it: no overflow.
  for (const ExpectedTensor& tensor : expectedTensors(config, prefix)) {
    const int64_t bytes = residentBytes(*gguf, tensor, keep_blocks, weight_bytes);
    switch (tensor.stage) {
      case TensorStage::kEmbedding:
        (*node_bytes)[0] += bytes;
        // Tied embeddings: the last stage's lm_head is the embedding (CausalLM::loadWeights).
        if (config.tie_word_embeddings && tensor.name == token_embedding) {
          (*node_bytes)[head] += bytes;
        }
        break;
      case TensorStage::kLayer:
        (*node_bytes)[static_cast<size_t>(tensor.layer) + 1] += bytes;
        break;
      case TensorStage::kHead:
        (*node_bytes)[head] += bytes;
        break;
    }
  }
  return true;
}

}  // namespace ree::models
