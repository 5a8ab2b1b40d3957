#include "ops_window.h"

namespace ree::compiler {

namespace {

Status readPair(const Node& node, const char* key, int64_t fallback, int64_t out[2]) {
  out[0] = out[1] = fallback;
  const Attribute* a = node.attribute(key);
  if (a == nullptr) return Status::kSuccess;
  REE_CHECK_ARG(a->kind == Attribute::Kind::kInts && a->ints.size() == 2,
                "%s: %s must list 2 values (only 2-D windows are supported)", node.label().c_str(),
                key);
  out[0] = a->ints[0];
  out[1] = a->ints[1];
  REE_CHECK_ARG(out[0] >= 1 && out[1] >= 1 && out[0] <= 4096 && out[1] <= 4096,
                "%s: %s must be in 1..4096", node.label().c_str(), key);
  return Status::kSuccess;
}

}  // namespace

Status readWindow2d(const Node& node, const int64_t in_hw[2], const int64_t kernel_hw[2],
                    Window2d* w) {
  const std::string auto_pad = node.stringAttribute("auto_pad", "NOTSET");
  REE_CHECK_ARG(auto_pad == "NOTSET" || auto_pad == "VALID", "%s: auto_pad %s is not supported",
                node.label().c_str(), auto_pad.c_str());
  REE_RETURN_IF_ERROR(readPair(node, "kernel_shape", 1, w->kernel));
  if (node.attribute("kernel_shape") == nullptr) {
    w->kernel[0] = kernel_hw[0];
    w->kernel[1] = kernel_hw[1];
  }
  REE_RETURN_IF_ERROR(readPair(node, "strides", 1, w->stride));
  REE_RETURN_IF_ERROR(readPair(node, "dilations", 1, w->dilation));
  REE_CHECK_ARG(node.intAttribute("ceil_mode", 0) == 0, "%s: ceil_mode = 1 is not supported",
                node.label().c_str());
  if (const Attribute* pads = node.attribute("pads")) {
    REE_CHECK_ARG(pads->kind == Attribute::Kind::kInts && pads->ints.size() == 4,
                  "%s: pads must list 4 values", node.label().c_str());
    for (int i = 0; i < 2; ++i) {
      w->pad_begin[i] = pads->ints[i];
      w->pad_end[i] = pads->ints[i + 2];
      REE_CHECK_ARG(w->pad_begin[i] >= 0 && w->pad_end[i] >= 0 && w->pad_begin[i] <= 4096 &&
                        w->pad_end[i] <= 4096,
                    "%s: pads must be in 0..4096", node.label().c_str());
    }
  }
  for (int i = 0; i < 2; ++i) {
    int64_t span = w->dilation[i] * (w->kernel[i] - 1) + 1;
    int64_t padded = in_hw[i] + w->pad_begin[i] + w->pad_end[i];
    REE_CHECK_ARG(padded >= span, "%s: window %lld is larger than the padded input %lld",
                  node.label().c_str(), static_cast<long long>(span),
                  static_cast<long long>(padded));
    w->out[i] = (padded - span) / w->stride[i] + 1;
  }
  return Status::kSuccess;
}

std::vector<int64_t> windowIndex(const Window2d& w, int64_t batch, int64_t channels,
                                 const int64_t in_hw[2], bool channels_in_rows,
                                 int64_t channel_begin, int64_t channel_count) {
  const int64_t channel_end = channel_count < 0 ? channels : channel_begin + channel_count;
  const int64_t oh = w.out[0], ow = w.out[1], kh = w.kernel[0], kw = w.kernel[1];
  std::vector<int64_t> index;
  index.reserve(static_cast<size_t>(batch * (channel_end - channel_begin) * oh * ow * kh * kw));
  auto source = [&](int64_t n, int64_t ch, int64_t y, int64_t x, int64_t i, int64_t j) {
    int64_t iy = y * w.stride[0] - w.pad_begin[0] + i * w.dilation[0];
    int64_t ix = x * w.stride[1] - w.pad_begin[1] + j * w.dilation[1];
    if (iy < 0 || iy >= in_hw[0] || ix < 0 || ix >= in_hw[1]) return int64_t{-1};
    return ((n * channels + ch) * in_hw[0] + iy) * in_hw[1] + ix;
  };
  for (int64_t n = 0; n < batch; ++n) {
    if (channels_in_rows) {
      for (int64_t ch = channel_begin; ch < channel_end; ++ch)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j)
                index.push_back(source(n, ch, y, x, i, j));
    } else {
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          for (int64_t ch = channel_begin; ch < channel_end; ++ch)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j)
                index.push_back(source(n, ch, y, x, i, j));
    }
  }
  return index;
}

}  // namespace ree::compiler
