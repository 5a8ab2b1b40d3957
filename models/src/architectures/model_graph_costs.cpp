#include "ree/models/model_graph_costs.h"

#include "ree/models/architecture.h"

namespace ree::models {

std::vector<NodeCost> modelGraphCosts(const ModelConfig& c, int weight_bytes) {
  const ArchitectureFacts& facts = architectureFacts(c.architecture);
  std::vector<NodeCost> nodes;
  int64_t h = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  int64_t inner = c.intermediate_size;
  NodeCost embed{"embedding", c.vocab_size * h * weight_bytes, 0, 0};
  if (facts.names.position_embedding != nullptr) {
    embed.parameter_bytes += c.max_position_embeddings * h * weight_bytes;
  }
  nodes.push_back(embed);
  int64_t attn_params = h * nh * hd + 2 * h * nkv * hd + nh * hd * h;
  // A gated MLP has three matrices (gate, up, down), an ungated one two (fc, proj).
  int64_t mlp_params = (facts.layout == LayerLayout::kGpt2 ? 2 : 3) * h * inner;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    NodeCost layer;
    layer.name = "layer." + std::to_string(i);
    layer.parameter_bytes = (attn_params + mlp_params + 2 * h) * weight_bytes;
    layer.flops_per_token = 2 * (attn_params + mlp_params);
    layer.kv_bytes_per_token = 2 * nkv * hd * weight_bytes;
    nodes.push_back(layer);
  }
  // The head reads a [vocab, hidden] matrix every token whether or not it is tied to the
  // embedding, and a pipeline's last stage must hold it (tied: a copy of the embedding).
  int64_t head_params = c.vocab_size * h + h;
  nodes.push_back(NodeCost{"head", head_params * weight_bytes, 2 * c.vocab_size * h, 0});
  return nodes;
}

}  // namespace ree::models
