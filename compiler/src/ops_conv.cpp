// Conv (2-D, any group count): per group, im2col, an exact gather of the group's input windows
// into rows (n, oh, ow) x cols (c, kh, kw) with zeros for padding, then one linear() against the
// group's weight rows [Cout/G, C/G*kh*kw] (their natural layout): every output is one canonical
// dot over (c, kh, kw) of its own group plus the bias. The [G, N*OH*OW, Cout/G] results are then
// transposed to NCHW (exact). With one group this is a single im2col and a single linear().
#include "device_ops.h"
#include "ops.h"
#include "ops_window.h"
#include "tensor_limit.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {

struct ConvShape {
  int64_t batch = 0, channels = 0, cout = 0, groups = 1;
  int64_t in_hw[2] = {0, 0};
  int64_t kernel_hw[2] = {0, 0};
};

Status readConvShape(const OpContext& c, const GraphTensor& x, const GraphTensor& w, ConvShape* s) {
  const std::string node_label = c.node.label();
  const char* label = node_label.c_str();
  REE_CHECK_ARG(x.shape.size() == 4 && w.shape.size() == 4,
                "%s: only 2-D convolutions (NCHW input, OIHW weight) are supported, got %s and %s",
                label, shapeText(x.shape).c_str(), shapeText(w.shape).c_str());
  s->batch = x.shape[0];
  s->channels = x.shape[1];
  s->cout = w.shape[0];
  s->groups = c.node.intAttribute("group", 1);
  REE_CHECK_ARG(s->groups >= 1 && s->channels % s->groups == 0 && s->cout % s->groups == 0,
                "%s: group %lld must divide the %lld input and %lld output channels", label,
                static_cast<long long>(s->groups), static_cast<long long>(s->channels),
                static_cast<long long>(s->cout));
  REE_CHECK_ARG(w.shape[1] == s->channels / s->groups,
                "%s: weight %s does not match %lld input channels in %lld group(s)", label,
                shapeText(w.shape).c_str(), static_cast<long long>(s->channels),
                static_cast<long long>(s->groups));
  for (int i = 0; i < 2; ++i) {
    s->in_hw[i] = x.shape[2 + i];
    s->kernel_hw[i] = w.shape[2 + i];
  }
  return Status::kSuccess;
}

}  // namespace

Status runConv(OpContext& c) {
  const GraphTensor *x, *w;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  REE_RETURN_IF_ERROR(c.floatInput(1, &w));
  ConvShape s;
  REE_RETURN_IF_ERROR(readConvShape(c, *x, *w, &s));
  Window2d window;
  REE_RETURN_IF_ERROR(readWindow2d(c.node, s.in_hw, s.kernel_hw, &window));
  REE_CHECK_ARG(window.kernel[0] == s.kernel_hw[0] && window.kernel[1] == s.kernel_hw[1],
                "%s: kernel_shape differs from the weight's", c.node.label().c_str());
  const GraphTensor* bias = c.input(2);
  REE_CHECK_ARG(bias == nullptr || (bias->type == ElementType::kFloat32 && bias->numel() == s.cout),
                "%s: bias must be float [%lld]", c.node.label().c_str(),
                static_cast<long long>(s.cout));
  const int64_t group_in = s.channels / s.groups, group_out = s.cout / s.groups;
  const int64_t rows = s.batch * window.out[0] * window.out[1];
  const int64_t k = group_in * s.kernel_hw[0] * s.kernel_hw[1];
  REE_CHECK_ARG(k >= 1 && group_out >= 1, "%s: empty convolution", c.node.label().c_str());
  REE_RETURN_IF_ERROR(checkTensorBytes(ElementType::kInt64, {rows, k}));  // one group's index map
  GraphTensor result;
  REE_RETURN_IF_ERROR(
      emptyOn(c.device, ElementType::kFloat32, {s.groups * rows, group_out}, &result));
  for (int64_t g = 0; g < s.groups && rows > 0; ++g) {
    GraphTensor columns;
    REE_RETURN_IF_ERROR(gatherFlat(
        *x, windowIndex(window, s.batch, s.channels, s.in_hw, false, g * group_in, group_in),
        {rows, k}, 0.0f, &columns));
    Tensor y = floatView(result).rows(g * rows, rows);
    Tensor weight = floatView(*w, {s.cout, k}).rows(g * group_out, group_out);
    Tensor b =
        bias != nullptr ? floatView(*bias, {s.cout}).rows(g * group_out, group_out) : Tensor();
    REE_RETURN_IF_ERROR(
        c.ops->linear(floatView(columns), weight, bias != nullptr ? &b : nullptr, y));
  }
  // [G, N, OH, OW, Cout/G] -> [N, G, Cout/G, OH, OW] = NCHW.
  GraphTensor grouped =
      reshapedView(result, {s.groups, s.batch, window.out[0], window.out[1], group_out});
  GraphTensor nchw;
  REE_RETURN_IF_ERROR(transposeTensor(grouped, {1, 0, 4, 2, 3}, &nchw));
  c.outputs[0] = reshapedView(nchw, {s.batch, s.cout, window.out[0], window.out[1]});
  return Status::kSuccess;
}

}  // namespace ree::compiler
