#include "src/nn/im2col.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstring>

namespace pstrain {
namespace {

// Runs are short (Wo floats, often 10 to 30), where a call to memcpy or a
// dynamic-size Eigen loop costs more than the work: fixed-size 4-float blocks
// compile to single vector instructions.
using Block = Eigen::Map<Eigen::Array4f>;
using ConstBlock = Eigen::Map<const Eigen::Array4f>;

inline void CopyRun(const float* src, int64_t stride, int64_t count, float* dst) {
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 4 <= count; i += 4) Block(dst + i) = ConstBlock(src + i);
  }
  for (; i < count; ++i) dst[i] = src[i * stride];
}

inline void AddRun(const float* src, int64_t stride, int64_t count, float* dst) {
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 4 <= count; i += 4) Block(dst + i) += ConstBlock(src + i);
  }
  for (; i < count; ++i) dst[i * stride] += src[i];
}

int64_t PaddedHeight(const ConvGeometry& g) { return g.height + 2 * g.padding; }
int64_t PaddedWidth(const ConvGeometry& g) { return g.width + 2 * g.padding; }

// Calls run(tap_row_offset, plane_offset) for every run of every tap of every
// sample: the run starts at cols + tap_row_offset and reads the (padded)
// input from plane_offset, with the input's row length PaddedWidth(g).
template <typename Run>
void ForEachRun(const ConvGeometry& g, int64_t samples, Run run) {
  const int64_t hp = PaddedHeight(g), wp = PaddedWidth(g);
  const int64_t row_len = samples * g.positions();
  int64_t tap = 0;
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t ki = 0; ki < g.kernel; ++ki) {
      for (int64_t kj = 0; kj < g.kernel; ++kj, ++tap) {
        for (int64_t n = 0; n < samples; ++n) {
          const int64_t plane = (n * g.channels + c) * hp * wp + ki * wp + kj;
          const int64_t col = tap * row_len + n * g.positions();
          for (int64_t oh = 0; oh < g.out_height; ++oh) {
            run(col + oh * g.out_width, plane + oh * g.stride * wp);
          }
        }
      }
    }
  }
}

}  // namespace

void Im2Col(const ConvGeometry& g, const float* in, int64_t samples, float* cols,
            FloatBuffer* padded) {
  if (g.padding > 0) {
    const int64_t hp = PaddedHeight(g), wp = PaddedWidth(g), planes = samples * g.channels;
    padded->assign(planes * hp * wp, 0.0f);
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t h = 0; h < g.height; ++h) {
        std::memcpy(padded->data() + (p * hp + h + g.padding) * wp + g.padding,
                    in + (p * g.height + h) * g.width, g.width * sizeof(float));
      }
    }
    in = padded->data();
  }
  ForEachRun(g, samples, [&](int64_t col, int64_t from) {
    CopyRun(in + from, g.stride, g.out_width, cols + col);
  });
}

void Col2Im(const ConvGeometry& g, const float* cols, int64_t samples, float* din,
            FloatBuffer* padded) {
  const int64_t hp = PaddedHeight(g), wp = PaddedWidth(g), planes = samples * g.channels;
  float* acc = din;
  if (g.padding > 0) {
    padded->resize(planes * hp * wp);
    acc = padded->data();
  }
  std::memset(acc, 0, planes * hp * wp * sizeof(float));
  ForEachRun(g, samples,
             [&](int64_t col, int64_t to) { AddRun(cols + col, g.stride, g.out_width, acc + to); });
  if (g.padding == 0) return;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t h = 0; h < g.height; ++h) {
      std::memcpy(din + (p * g.height + h) * g.width,
                  acc + (p * hp + h + g.padding) * wp + g.padding, g.width * sizeof(float));
    }
  }
}

}  // namespace pstrain
