// The model operators ree::rope, attention, embedding and sample: their schemas (a FRAGMENT of the
// library "ree", the schemas torch.library inferred from the Python operators they replace), their
// CPU and CUDA kernels and the shared Autograd kernel (forwardOnly, torch_ops_library.cpp). Each
// makes the checks, messages and RepOps kernel calls that ree/ops.py made through ree._C (the
// nanobind entry points of ops_bindings.cpp, with the same arguments), so the bits are the same;
// python/tests/test_ops_model.py pins them against those calls.
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ree/kernels/attention.h"
#include "ree/kernels/pointwise.h"
#include "ree/kernels/rope.h"
#include "ree/kernels/sampling.h"
#include "torch_ops_util.h"

namespace ree::torch_ops {
namespace {

constexpr const char* kSchemas[] = {
    "rope(Tensor x, Tensor positions, Tensor inv_freq, bool interleaved=False) -> Tensor",
    "attention(Tensor q, Tensor k, Tensor v, float? scale=None) -> Tensor",
    "embedding(Tensor ids, Tensor table) -> Tensor",
    "sample(Tensor logits, float temperature=1., SymInt top_k=0, float top_p=1., SymInt seed=0, "
    "SymInt sequence=0, SymInt step=0) -> Tensor",
};

#if REE_WITH_CUDA
// attention, embedding and sample cannot be captured in a CUDA graph: their small host tables
// and parameters go through reused pinned buffers whose addresses a graph would keep (a replay
// would read a later call's values), and embedding waits for its id check. Refused by name rather
// than failing inside the capture; their schemas carry torch.Tag.cudagraph_unsafe.
Status refuseCapture(const char* op, cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) cudaGetLastError();
  REE_CHECK_ARG(capture == cudaStreamCaptureStatusNone,
                "ree.ops.%s cannot run while a CUDA graph is captured (torch.cuda.graph, "
                "torch.compile mode='reduce-overhead'): it reads host tables at run time",
                op);
  return Status::kSuccess;
}
#endif

// Python's str() of a dtype ("torch.float32"), as the messages of integer arguments print it.
std::string torchDtype(const at::Tensor& t) {
  return "torch." + dtypeText(t.scalar_type());
}

bool isIntegral(const at::Tensor& t) {
  return !at::isFloatingType(t.scalar_type()) && t.scalar_type() != at::kBool;
}

// x [..., tokens, heads, head_dim] and positions [..., tokens] or [tokens]: the leading shape.
at::IntArrayRef ropeLead(const at::Tensor& x, const at::Tensor& positions,
                         const at::Tensor& inv_freq) {
  TORCH_CHECK_VALUE(x.dim() >= 3,
                    "ree.ops.rope: x must be [..., tokens, heads, head_dim], got shape ",
                    shapeText(x.sizes()));
  const at::IntArrayRef lead = x.sizes().slice(0, x.dim() - 2);
  const at::IntArrayRef last = lead.slice(lead.size() - 1);
  TORCH_CHECK_VALUE(positions.sizes() == lead || positions.sizes() == last,
                    "ree.ops.rope: positions must have shape ", shapeText(lead), " or ",
                    shapeText(last), ", got ", shapeText(positions.sizes()));
  TORCH_CHECK_VALUE(
      inv_freq.dim() == 1 && 2 * inv_freq.numel() <= x.size(-1) && inv_freq.numel() > 0,
      "ree.ops.rope: inv_freq must be 1-D with 1 .. head_dim/2 entries, got shape ",
      shapeText(inv_freq.sizes()), " for head_dim ", x.size(-1));
  return lead;
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq_in,
                bool interleaved) {
  const at::Device device =
      deviceOf("rope", {{"x", &x}, {"positions", &positions}, {"inv_freq", &inv_freq_in}});
  const DType dtype = dtypeOf("rope", "x", x);
  TORCH_CHECK_TYPE(inv_freq_in.scalar_type() == at::kFloat, "ree.ops.rope: inv_freq has dtype ",
                   dtypeText(inv_freq_in.scalar_type()), "; supported: float32");
  const at::IntArrayRef lead = ropeLead(x, positions, inv_freq_in);
  TORCH_CHECK_TYPE(isIntegral(positions), "ree.ops.rope: positions must be integers, got ",
                   torchDtype(positions));
  const at::Tensor pos = positions.expand(lead).reshape(-1).to(at::kInt).contiguous();
  const at::Tensor inv_freq = inv_freq_in.contiguous();
  at::Tensor y = x.clone(at::MemoryFormat::Contiguous);  // rotated in place
  const int64_t tokens = pos.numel();
  if (tokens == 0) return y;
  const int heads = static_cast<int>(x.size(-2)), head_dim = static_cast<int>(x.size(-1));
  const int64_t stride = static_cast<int64_t>(heads) * head_dim;
  const int rotary_dim = static_cast<int>(2 * inv_freq.numel());
  const auto layout = interleaved ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
  const auto* p = pos.data_ptr<int32_t>();
  const auto* f = inv_freq.data_ptr<float>();
  void* data = y.data_ptr();
  REE_TORCH_RUN(
      device,
      repops::cpu::rope(dtype, data, tokens, heads, head_dim, stride, p, f, rotary_dim, layout),
      repops::cuda::rope(dtype, data, tokens, heads, head_dim, stride, p, f, rotary_dim, layout,
                         cuda_stream));
  return y;
}

void checkAttentionShapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK_VALUE(q.dim() == 4 && k.dim() == 4 && k.sizes() == v.sizes(),
                    "ree.ops.attention: q [batch, q_len, heads, head_dim] and k, v [batch, kv_len, "
                    "kv_heads, head_dim] of one shape, got ",
                    shapeText(q.sizes()), ", ", shapeText(k.sizes()), ", ", shapeText(v.sizes()));
  const bool fit = k.size(0) == q.size(0) && k.size(3) == q.size(3) && k.size(1) >= q.size(1) &&
                   k.size(2) >= 1 && q.size(2) % k.size(2) == 0;
  TORCH_CHECK_VALUE(fit, "ree.ops.attention: k/v ", shapeText(k.sizes()), " do not fit q ",
                    shapeText(q.sizes()),
                    " (same batch and head_dim, kv_len >= q_len, kv_heads dividing heads)");
}

// Causal attention of `batch` sequences of q_len queries each over kv_len positions, the queries
// the last q_len of them: K and V in the paged cache's contiguous layout (one block per sequence).
at::Tensor attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                     std::optional<double> scale) {
  checkAttentionShapes(q_in, k_in, v_in);
  const at::Device device = deviceOf("attention", {{"q", &q_in}, {"k", &k_in}, {"v", &v_in}});
  const DType q_dtype = dtypeOf("attention", "q", q_in);
  const DType kv_dtype = dtypeOf("attention", "k", k_in);
  TORCH_CHECK_TYPE(v_in.scalar_type() == k_in.scalar_type(),
                   "ree.ops.attention: k and v must have one dtype, got ", torchDtype(k_in), ", ",
                   torchDtype(v_in));
  const int batch = static_cast<int>(q_in.size(0)), q_len = static_cast<int>(q_in.size(1));
  const int kv_len = static_cast<int>(k_in.size(1));
  TORCH_CHECK_VALUE(kv_len >= 1, "attention: need 0 <= q_len <= kv_len and kv_len >= 1");
  const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  at::Tensor out = at::empty_like(q);
  if (batch == 0 || q_len == 0) return out;
  std::vector<int32_t> query_offsets(static_cast<size_t>(batch) + 1);
  for (int s = 0; s <= batch; ++s)
    query_offsets[s] = s * q_len;
  const std::vector<int32_t> cached_lens(static_cast<size_t>(batch), kv_len - q_len);
  repops::AttentionArgs args;
  args.batch = batch;
  args.query_offsets = query_offsets.data();
  args.cached_lens = cached_lens.data();
  args.n_heads = static_cast<int>(q.size(2));
  args.n_kv_heads = static_cast<int>(k.size(2));
  args.head_dim = static_cast<int>(q.size(3));
  args.q = q.data_ptr();
  args.q_dtype = q_dtype;
  args.out = out.data_ptr();
  args.out_dtype = q_dtype;
  args.cache.k = k.data_ptr();
  args.cache.v = v.data_ptr();
  args.cache.dtype = kv_dtype;
  args.cache.num_blocks = batch;
  args.cache.block_size = kv_len;
  args.cache.max_blocks_per_seq = 1;
  args.scale = scale ? static_cast<float>(*scale) : 0.0f;  // 0: the default crRsqrt(head_dim)
  REE_TORCH_RUN(device, repops::cpu::attention(args), [&] {
    REE_RETURN_IF_ERROR(refuseCapture("attention", cuda_stream));
    return repops::cuda::attention(args, cuda_stream);
  }());
  return out;
}

// ids [n] as the kernels' int32 ids, an id beyond int32 as -1 (so that the kernel reports it
// rather than seeing it wrapped). On the CPU the first id outside [0, vocab) raises here, naming
// its position; on CUDA the kernel checks them, and the call waits for that check (one 8-byte
// read back per call: a clean error rather than a device-side assert).
at::Tensor embeddingIds(const at::Device& device, const at::Tensor& ids, int64_t vocab) {
  const at::Tensor flat = ids.reshape(-1).to(at::kLong).contiguous();
  if (!device.is_cpu()) {
    const int64_t int32_max = std::numeric_limits<int32_t>::max();
    return at::where(flat.lt(0).logical_or(flat.gt(int32_max)), -1, flat).to(at::kInt).contiguous();
  }
  const int64_t n = flat.numel();
  const auto* in = flat.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(in[i] >= 0 && in[i] < vocab, "ree.ops.embedding: ids[", i, "] = ", in[i],
                      " is outside the vocabulary [0, ", vocab, ")");
  }
  at::Tensor out = at::empty({n}, flat.options().dtype(at::kInt));
  auto* narrow = out.data_ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    narrow[i] = in[i] > std::numeric_limits<int32_t>::max() ? -1 : static_cast<int32_t>(in[i]);
  return out;
}

at::Tensor embedding(const at::Tensor& ids_in, const at::Tensor& table_in) {
  const at::Device device = deviceOf("embedding", {{"ids", &ids_in}, {"table", &table_in}});
  const DType dtype = dtypeOf("embedding", "table", table_in);
  TORCH_CHECK_TYPE(isIntegral(ids_in), "ree.ops.embedding: ids must be integers, got ",
                   torchDtype(ids_in));
  TORCH_CHECK_VALUE(table_in.dim() == 2, "ree.ops.embedding: table must be 2-D [vocab, dim], got ",
                    shapeText(table_in.sizes()));
  const int64_t vocab = table_in.size(0), dim = table_in.size(1);
  const at::Tensor ids = embeddingIds(device, ids_in, vocab);
  const at::Tensor table = table_in.contiguous();
  const int64_t count = ids.numel();
  at::Tensor out = at::empty({count, dim}, table.options());
  if (count > 0) {
    const void* t = table.data_ptr();
    const auto* id = ids.data_ptr<int32_t>();
    void* o = out.data_ptr();
    try {
      REE_TORCH_RUN(device, repops::cpu::embedding(dtype, t, vocab, dim, id, count, o), [&] {
        REE_RETURN_IF_ERROR(refuseCapture("embedding", cuda_stream));
        return repops::cuda::embedding(dtype, t, vocab, dim, id, count, o, cuda_stream);
      }());
    } catch (const c10::ValueError& error) {
      // The device check saw an id outside the vocabulary: raise the CPU's message, which names
      // the first such id as given (the kernel sees ids beyond int32 as -1).
      const bool bad_id =
          std::string(error.what()).find("outside the vocabulary") != std::string::npos;
      if (!device.is_cpu() && bad_id) embeddingIds(at::Device(at::kCPU), ids_in.cpu(), vocab);
      throw;
    }
  }
  std::vector<int64_t> shape(ids_in.sizes().begin(), ids_in.sizes().end());
  shape.push_back(dim);
  return out.reshape(shape);
}

// One token per row; row b draws with the Philox key (seed, sequence + b, step).
at::Tensor sample(const at::Tensor& logits, double temperature, int64_t top_k, double top_p,
                  int64_t seed, int64_t sequence, int64_t step) {
  const at::Device device = deviceOf("sample", {{"logits", &logits}});
  dtypeOf("sample", "logits", logits);
  TORCH_CHECK_VALUE((logits.dim() == 1 || logits.dim() == 2) && logits.size(-1) >= 1,
                    "ree.ops.sample: logits must be [batch, vocab] or [vocab], got ",
                    shapeText(logits.sizes()));
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{"seed", seed}, {"sequence", sequence}, {"step", step}}) {
    TORCH_CHECK_VALUE(value >= 0, "ree.ops.sample: ", name, " must be in [0, 2^64), got ", value);
  }
  TORCH_CHECK_TYPE(
      top_k >= std::numeric_limits<int32_t>::min() && top_k <= std::numeric_limits<int32_t>::max(),
      "ree.ops.sample: top_k must fit in 32 bits, got ", top_k);
  const int64_t vocab = logits.size(-1);
  const at::Tensor rows = castRaw(logits.reshape({-1, vocab}), at::kFloat);
  const int64_t batch = rows.size(0);
  at::Tensor tokens = at::empty({batch}, rows.options().dtype(at::kInt));
  std::vector<repops::SamplingParams> params(static_cast<size_t>(batch));
  for (size_t b = 0; b < params.size(); ++b) {
    params[b].temperature = static_cast<float>(temperature);
    params[b].top_k = static_cast<int32_t>(top_k);
    params[b].top_p = static_cast<float>(top_p);
    params[b].seed = static_cast<uint64_t>(seed);
    params[b].sequence = static_cast<uint64_t>(sequence) + b;
    params[b].step = static_cast<uint64_t>(step);
  }
  const auto* in = rows.data_ptr<float>();
  auto* out = tokens.data_ptr<int32_t>();
  REE_TORCH_RUN(device, repops::cpu::sample(in, batch, vocab, params.data(), out), [&] {
    REE_RETURN_IF_ERROR(refuseCapture("sample", cuda_stream));
    return repops::cuda::sample(in, batch, vocab, params.data(), out, cuda_stream);
  }());
  return tokens.to(at::kLong).reshape(logits.sizes().slice(0, logits.dim() - 1));
}

std::string operatorName(const char* schema) {
  const std::string text = schema;
  return text.substr(0, text.find('('));
}

void registerModelOps(torch::Library& m) {
  m.impl("rope", &rope);
  m.impl("attention", &attention);
  m.impl("embedding", &embedding);
  m.impl("sample", &sample);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(ree, m) {
  for (const char* schema : kSchemas) {
    const bool host_tables = operatorName(schema) != "rope";  // see refuseCapture
    const std::vector<at::Tag> tags =
        host_tables ? std::vector<at::Tag>{at::Tag::cudagraph_unsafe} : std::vector<at::Tag>{};
    m.def(schema, tags);  // an lvalue: a temporary would pick the def(schema, function) template
  }
}

TORCH_LIBRARY_IMPL(ree, Autograd, m) {
  for (const char* schema : kSchemas) {
    m.impl(operatorName(schema).c_str(), torch::CppFunction::makeFromBoxedFunction<&forwardOnly>());
  }
}

TORCH_LIBRARY_IMPL(ree, CPU, m) {
  registerModelOps(m);
}

TORCH_LIBRARY_IMPL(ree, CUDA, m) {
  registerModelOps(m);
}

}  // namespace ree::torch_ops
