// Conv (2-D, group 1): im2col, an exact gather of the input windows into rows (n, oh, ow) x cols
// (c, kh, kw) with zeros for padding, then one linear() against the weight [Cout, C*kh*kw] (its
// natural layout): every output is one canonical dot over (c, kh, kw) plus the bias, then the
// [N*OH*OW, Cout] result is transposed to NCHW (exact).
#include "device_ops.h"
#include "ops.h"
#include "ops_window.h"
#include "tensor_limit.h"
#include "tensor_util.h"

namespace ree::compiler {

Status runConv(OpContext& c) {
  const GraphTensor *x, *w;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  REE_RETURN_IF_ERROR(c.floatInput(1, &w));
  REE_CHECK_ARG(x->shape.size() == 4 && w->shape.size() == 4,
                "%s: only 2-D convolutions (NCHW input, OIHW weight) are supported, got %s and %s",
                c.node.label().c_str(), shapeText(x->shape).c_str(), shapeText(w->shape).c_str());
  REE_CHECK_ARG(c.node.intAttribute("group", 1) == 1, "%s: group != 1 is not supported",
                c.node.label().c_str());
  const int64_t batch = x->shape[0], channels = x->shape[1], cout = w->shape[0];
  REE_CHECK_ARG(w->shape[1] == channels, "%s: weight %s does not match %lld input channels",
                c.node.label().c_str(), shapeText(w->shape).c_str(),
                static_cast<long long>(channels));
  const int64_t in_hw[2] = {x->shape[2], x->shape[3]};
  const int64_t kernel_hw[2] = {w->shape[2], w->shape[3]};
  Window2d window;
  REE_RETURN_IF_ERROR(readWindow2d(c.node, in_hw, kernel_hw, &window));
  REE_CHECK_ARG(window.kernel[0] == kernel_hw[0] && window.kernel[1] == kernel_hw[1],
                "%s: kernel_shape differs from the weight's", c.node.label().c_str());
  const GraphTensor* bias = c.input(2);
  REE_CHECK_ARG(bias == nullptr || (bias->type == ElementType::kFloat32 && bias->numel() == cout),
                "%s: bias must be float [%lld]", c.node.label().c_str(),
                static_cast<long long>(cout));
  const int64_t rows = batch * window.out[0] * window.out[1];
  const int64_t k = channels * kernel_hw[0] * kernel_hw[1];
  REE_RETURN_IF_ERROR(checkTensorBytes(ElementType::kInt64, {rows, k}));  // the index map
  GraphTensor columns;
  REE_RETURN_IF_ERROR(gatherFlat(*x, windowIndex(window, batch, channels, in_hw, false), {rows, k},
                                 0.0f, &columns));
  REE_CHECK_ARG(k >= 1 && cout >= 1, "%s: empty convolution", c.node.label().c_str());
  GraphTensor result;
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, {rows, cout}, &result));
  if (rows > 0) {
    Tensor y = floatView(result);
    Tensor b = bias != nullptr ? floatView(*bias, {cout}) : Tensor();
    REE_RETURN_IF_ERROR(c.ops->linear(floatView(columns), floatView(*w, {cout, k}),
                                      bias != nullptr ? &b : nullptr, y));
  }
  GraphTensor nhwc = reshapedView(result, {batch, window.out[0], window.out[1], cout});
  return transposeTensor(nhwc, {0, 3, 1, 2}, &c.outputs[0]);
}

}  // namespace ree::compiler
