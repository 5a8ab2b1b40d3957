// The reproducible set's operators over quantised weights (quantized_linear.h).
#include "quantized_linear.h"

#include "ree/kernels/quant_linear.h"

namespace ree {

Status quantizedLinear(Device device, cudaStream_t stream, const Tensor& x, const Tensor& weight,
                       const QuantizedWeightInfo& info, const Tensor* bias, Tensor& out,
                       bool accumulate) {
  repops::QuantLinearArgs args;
  args.w_type = info.type;
  args.w_row_bytes = info.row_bytes;
  repops::LinearArgs& l = args.linear;
  l.x = x.data();
  l.x_dtype = x.dtype();
  l.w = weight.data();
  if (bias != nullptr) {
    REE_CHECK_ARG(bias->dtype() == DType::kF32,
                  "linear: a quantised weight's bias must be f32 (%s)", bias->describe().c_str());
    l.bias = bias->data();
    l.bias_dtype = DType::kF32;
  }
  l.y = out.data();
  l.y_dtype = out.dtype();
  l.m = x.numel() / x.dim(-1);
  l.n = weight.dim(0);
  l.k = info.k;
  l.w_is_constant = true;
  l.accumulate = accumulate;
  REE_CHECK_ARG(x.dim(-1) == l.k && out.numel() == l.m * l.n,
                "linear: x %s, quantised weight [%lld, %lld] %s, out %s", x.describe().c_str(),
                static_cast<long long>(l.n), static_cast<long long>(l.k),
                repops::quantTypeName(info.type), out.describe().c_str());
  if (!device.isCuda()) return repops::cpu::quantLinear(args);
#if defined(REE_WITH_CUDA)
  return repops::cuda::quantLinear(args, stream);
#else
  (void)stream;
  return REE_FAIL(Status::kUnsupported, "REE was built without CUDA");
#endif
}

Status quantizedEmbedding(Device device, cudaStream_t stream, const std::vector<int32_t>& ids,
                          const int32_t* device_ids, const Tensor& table,
                          const QuantizedWeightInfo& info, Tensor& out) {
  const int64_t count = static_cast<int64_t>(ids.size());
  REE_CHECK_ARG(out.dtype() == DType::kF32 && out.numel() == count * info.k,
                "embedding: a quantised table [%lld, %lld] needs an f32 out of %lld x %lld "
                "values (got %s)",
                static_cast<long long>(table.dim(0)), static_cast<long long>(info.k),
                static_cast<long long>(count), static_cast<long long>(info.k),
                out.describe().c_str());
  repops::QuantEmbeddingArgs args;
  args.table = table.data();
  args.type = info.type;
  args.rows = table.dim(0);
  args.k = info.k;
  args.row_bytes = info.row_bytes;
  args.ids = ids.data();
  args.count = count;
  args.out = out.as<float>();
  if (!device.isCuda()) return repops::cpu::quantEmbedding(args);
#if defined(REE_WITH_CUDA)
  return repops::cuda::quantEmbedding(args, device_ids, stream);
#else
  (void)stream;
  (void)device_ids;
  return REE_FAIL(Status::kUnsupported, "REE was built without CUDA");
#endif
}

}  // namespace ree
