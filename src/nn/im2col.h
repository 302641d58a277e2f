// im2col / col2im: turn a convolution into one GEMM. The column buffer is
// row-major [C * k * k, N * Ho * Wo]: one row per kernel tap (c, ki, kj),
// holding that tap's input value for every output position of every sample.
// Rows are built from runs of Wo values, one per output row.
//
// Padding is handled once, by copying the input into a zero-bordered buffer
// (Im2Col's `padded`, Col2Im's scratch), so the copy loops test no bounds.
#pragma once

#include <cstdint>
#include <vector>

#include "src/common/tensor.h"

namespace pstrain {

struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;
  int64_t kernel = 0, stride = 1, padding = 0;
  int64_t out_height = 0, out_width = 0;

  int64_t taps() const { return channels * kernel * kernel; }
  int64_t positions() const { return out_height * out_width; }
};

// cols = im2col(in), for `samples` images [C, H, W] stored back to back.
// `padded` is scratch, used when padding > 0 (resized as needed).
void Im2Col(const ConvGeometry& g, const float* in, int64_t samples, float* cols,
            FloatBuffer* padded);
// din = col2im(cols): every tap's value added back to the input element it
// was read from; overwrites din (samples * C * H * W floats). `padded` is
// scratch, used when padding > 0.
void Col2Im(const ConvGeometry& g, const float* cols, int64_t samples, float* din,
            FloatBuffer* padded);

}  // namespace pstrain
