// 2-D sliding windows over NCHW tensors (Conv, MaxPool): the attributes, the output size, and the
// im2col index map (an exact gather; -1 marks padding).
#pragma once

#include <cstdint>
#include <vector>

#include "ops.h"

namespace ree::compiler {

struct Window2d {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0};
  int64_t pad_end[2] = {0, 0};
  int64_t out[2] = {0, 0};
};

// Reads kernel_shape (or `kernel_hw` when the attribute is absent), strides, dilations, pads and
// auto_pad (NOTSET only) for input spatial dims `in_hw`.
Status readWindow2d(const Node& node, const int64_t in_hw[2], const int64_t kernel_hw[2],
                    Window2d* out);

// For every (n, c, oh, ow) and kernel offset (kh, kw), the flat input index or -1 (padding), laid
// out as rows (n, oh, ow) x cols (c, kh, kw) when `channels_in_rows` is false (im2col for Conv),
// or rows (n, c, oh, ow) x cols (kh, kw) when true (pooling). `channels` is the input's channel
// count; only channels [channel_begin, channel_begin + channel_count) are visited (a Conv group),
// all of them when channel_count < 0.
std::vector<int64_t> windowIndex(const Window2d& w, int64_t batch, int64_t channels,
                                 const int64_t in_hw[2], bool channels_in_rows,
                                 int64_t channel_begin = 0, int64_t channel_count = -1);

}  // namespace ree::compiler
