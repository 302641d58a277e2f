// The kernels of kernels.h. Each is a grid-stride loop over its outputs;
// every output is computed by one thread (gathers, no atomics), so results
// do not depend on scheduling.
#include <algorithm>

#include "src/gpu/kernels.h"

namespace pstrain::gpu {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{1} << 16));
}

__device__ int64_t First() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ int64_t Step() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

// Queues kernel<<<...>>>(args...) over n outputs; nothing for n == 0 (a
// launch of no blocks is an error).
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), int64_t n, cudaStream_t stream, Args... args) {
  if (n <= 0) return cudaSuccess;
  kernel<<<Blocks(n), kThreads, 0, stream>>>(args...);
  return cudaGetLastError();
}

__global__ void FillKernel(float* data, int64_t n, float value) {
  for (int64_t i = First(); i < n; i += Step()) data[i] = value;
}

__global__ void MultiplyKernel(float* data, const float* factor, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) data[i] *= factor[i];
}

__global__ void AddBiasRowsKernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t i = First(); i < rows * cols; i += Step()) y[i] += bias[i % cols];
}

__global__ void Im2ColKernel(WindowShape g, const float* in, int64_t samples, float* cols) {
  const int64_t positions = g.out_height * g.out_width, row = samples * positions;
  const int64_t n = g.channels * g.kernel * g.kernel * row;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t tap = i / row, s = (i % row) / positions, pos = i % positions;
    const int64_t c = tap / (g.kernel * g.kernel), ki = (tap / g.kernel) % g.kernel;
    const int64_t kj = tap % g.kernel;
    const int64_t h = (pos / g.out_width) * g.stride - g.padding + ki;
    const int64_t w = (pos % g.out_width) * g.stride - g.padding + kj;
    const bool inside = h >= 0 && h < g.height && w >= 0 && w < g.width;
    cols[i] = inside ? in[((s * g.channels + c) * g.height + h) * g.width + w] : 0.0f;
  }
}

// The output rows (or columns) whose window covers input row x: [*lo, *hi].
__device__ void Covering(int64_t x, int64_t kernel, int64_t stride, int64_t padding, int64_t outs,
                         int64_t* lo, int64_t* hi) {
  const int64_t first = x + padding - kernel + 1;
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  *hi = min((x + padding) / stride, outs - 1);
}

__global__ void Col2ImKernel(WindowShape g, const float* cols, int64_t samples, float* din) {
  const int64_t plane = g.height * g.width, positions = g.out_height * g.out_width;
  const int64_t row = samples * positions, n = samples * g.channels * plane;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t s = i / (g.channels * plane), c = (i / plane) % g.channels;
    const int64_t h = (i % plane) / g.width, w = i % g.width;
    int64_t oh0, oh1, ow0, ow1;
    Covering(h, g.kernel, g.stride, g.padding, g.out_height, &oh0, &oh1);
    Covering(w, g.kernel, g.stride, g.padding, g.out_width, &ow0, &ow1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      const int64_t ki = h + g.padding - oh * g.stride;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t tap = (c * g.kernel + ki) * g.kernel + (w + g.padding - ow * g.stride);
        sum += cols[tap * row + s * positions + oh * g.out_width + ow];
      }
    }
    din[i] = sum;
  }
}

__global__ void GemmToSamplesKernel(const float* gemm, const float* bias, int64_t oc,
                                    int64_t samples, int64_t positions, float* out) {
  for (int64_t i = First(); i < oc * samples * positions; i += Step()) {
    const int64_t s = i / (oc * positions), o = (i / positions) % oc, q = i % positions;
    out[i] = gemm[(o * samples + s) * positions + q] + (bias != nullptr ? bias[o] : 0.0f);
  }
}

__global__ void SamplesToGemmKernel(const float* in, int64_t oc, int64_t samples, int64_t positions,
                                    float* gemm) {
  for (int64_t i = First(); i < oc * samples * positions; i += Step()) {
    const int64_t o = i / (samples * positions), s = (i / positions) % samples;
    gemm[i] = in[(s * oc + o) * positions + i % positions];
  }
}

// The in-bounds part of output (oh, ow)'s window: rows [*h0, *h1), columns [*w0, *w1).
__device__ void Window(const WindowShape& g, int64_t oh, int64_t ow, int64_t* h0, int64_t* h1,
                       int64_t* w0, int64_t* w1) {
  const int64_t h = oh * g.stride - g.padding, w = ow * g.stride - g.padding;
  *h0 = max(h, int64_t{0});
  *h1 = min(h + g.kernel, g.height);
  *w0 = max(w, int64_t{0});
  *w1 = min(w + g.kernel, g.width);
}

__global__ void PoolForwardKernel(WindowShape g, int64_t planes, const float* in, float* out,
                                  int32_t* argmax) {
  const int64_t outputs = g.out_height * g.out_width;
  const float scale = 1.0f / static_cast<float>(g.kernel * g.kernel);
  for (int64_t i = First(); i < planes * outputs; i += Step()) {
    const float* src = in + (i / outputs) * g.height * g.width;
    int64_t h0, h1, w0, w1;
    Window(g, (i % outputs) / g.out_width, i % g.out_width, &h0, &h1, &w0, &w1);
    if (argmax != nullptr) {
      int64_t best = h0 * g.width + w0;
      float best_value = src[best];
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) {
          const float v = src[h * g.width + w];
          if (v > best_value) best = h * g.width + w;
          best_value = fmaxf(v, best_value);
        }
      }
      out[i] = best_value;
      argmax[i] = static_cast<int32_t>(best);
      continue;
    }
    float sum = 0.0f;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) sum += src[h * g.width + w];
    }
    out[i] = sum * scale;
  }
}

// din of each input element: the dout of every output whose window covers
// it (maxpool: only those whose maximum it was).
__global__ void PoolBackwardKernel(WindowShape g, int64_t planes, const float* dout,
                                   const int32_t* argmax, float* din) {
  const int64_t plane = g.height * g.width, outputs = g.out_height * g.out_width;
  const float scale = 1.0f / static_cast<float>(g.kernel * g.kernel);
  for (int64_t i = First(); i < planes * plane; i += Step()) {
    const int64_t p = i / plane, at = i % plane, h = at / g.width, w = at % g.width;
    int64_t oh0, oh1, ow0, ow1;
    Covering(h, g.kernel, g.stride, g.padding, g.out_height, &oh0, &oh1);
    Covering(w, g.kernel, g.stride, g.padding, g.out_width, &ow0, &ow1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = p * outputs + oh * g.out_width + ow;
        if (argmax == nullptr) {
          sum += dout[o] * scale;
        } else if (argmax[o] == at) {
          sum += dout[o];
        }
      }
    }
    din[i] = sum;
  }
}

__global__ void ActivationForwardKernel(Activation kind, const float* in, int64_t n, float* out) {
  for (int64_t i = First(); i < n; i += Step()) {
    const float x = in[i];
    out[i] = kind == Activation::kRelu      ? fmaxf(x, 0.0f)
             : kind == Activation::kSigmoid ? 1.0f / (1.0f + expf(-x))
                                            : tanhf(x);
  }
}

__global__ void ActivationBackwardKernel(Activation kind, const float* y, const float* dy,
                                         int64_t n, float* dx) {
  for (int64_t i = First(); i < n; i += Step()) {
    const float v = y[i], g = dy[i];
    dx[i] = kind == Activation::kRelu      ? (v > 0.0f ? g : 0.0f)
            : kind == Activation::kSigmoid ? g * v * (1.0f - v)
                                           : g * (1.0f - v * v);
  }
}

// src/common/random.h's Mix64 and UnitFloat, on the device.
__device__ uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__global__ void DropoutKernel(const float* in, int64_t n, uint64_t key, float rate, float scale,
                              float* out, float* mask) {
  for (int64_t i = First(); i < n; i += Step()) {
    const float unit = static_cast<float>(Mix64(key + i) >> 40) * (1.0f / 16777216.0f);
    mask[i] = unit < rate ? 0.0f : scale;
    out[i] = in[i] * mask[i];
  }
}

// One row per thread, in double as the CPU's loss.cc: rows are short
// (classes), and the loss must match the CPU's closely.
__global__ void SoftmaxKernel(const float* logits, const float* labels, int64_t rows,
                              int64_t classes, float scale, float* row_loss, float* grad) {
  for (int64_t r = First(); r < rows; r += Step()) {
    const float* x = logits + r * classes;
    const auto label = static_cast<int64_t>(labels[r]);
    float top = x[0];
    for (int64_t c = 1; c < classes; ++c) top = fmaxf(top, x[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += exp(static_cast<double>(x[c] - top));
    const double log_sum = log(sum);
    for (int64_t c = 0; c < classes; ++c) {
      const double p = exp(static_cast<double>(x[c] - top) - log_sum);
      grad[r * classes + c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) * scale);
    }
    row_loss[r] = static_cast<float>(log_sum + top - x[label]);
  }
}

__global__ void BceKernel(const float* logits, const float* labels, int64_t rows, float scale,
                          float* row_loss, float* grad) {
  for (int64_t r = First(); r < rows; r += Step()) {
    const double x = logits[r], y = labels[r], e = exp(-fabs(x));
    const double sigmoid = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    grad[r] = static_cast<float>((sigmoid - y) * scale);
    row_loss[r] = static_cast<float>(fmax(x, 0.0) - x * y + log1p(e));
  }
}

__global__ void EmbeddingBagForwardKernel(const float* table, const int32_t* ids, int64_t samples,
                                          int64_t fields, int64_t dim, bool concat, float scale,
                                          float* out) {
  const int64_t width = concat ? fields * dim : dim;
  for (int64_t i = First(); i < samples * width; i += Step()) {
    const int64_t s = i / width, w = i % width;
    if (concat) {
      out[i] = table[static_cast<int64_t>(ids[s * fields + w / dim]) * dim + w % dim];
      continue;
    }
    float sum = 0.0f;
    for (int64_t f = 0; f < fields; ++f)
      sum = __fadd_rn(sum, table[static_cast<int64_t>(ids[s * fields + f]) * dim + w]);
    out[i] = scale == 1.0f ? sum : __fmul_rn(sum, scale);
  }
}

__global__ void EmbeddingBagBackwardKernel(const float* dout, const int32_t* start,
                                           const int32_t* occurrences, int64_t range, int64_t rows,
                                           int64_t fields, int64_t dim, bool concat, float scale,
                                           float* grad) {
  const int64_t width = concat ? fields * dim : dim;
  for (int64_t i = First(); i < rows * dim; i += Step()) {
    const int64_t r = i / dim, d = i % dim;
    float sum = 0.0f;
    if (r < range) {
      for (int32_t k = start[r]; k < start[r + 1]; ++k) {
        const int64_t at = occurrences[k], s = at / fields, f = at % fields;
        const float dy = dout[s * width + (concat ? f * dim : 0) + d];
        sum = __fadd_rn(sum, concat ? dy : __fmul_rn(dy, scale));
      }
    }
    grad[i] = sum;
  }
}

__global__ void ScatterRowsKernel(const float* packed, const int32_t* rows, int64_t count,
                                  int64_t dim, float* table) {
  for (int64_t i = First(); i < count * dim; i += Step())
    table[static_cast<int64_t>(rows[i / dim]) * dim + i % dim] = packed[i];
}

__global__ void GatherRowsKernel(const float* table, const int32_t* rows, int64_t count,
                                 int64_t dim, float* packed) {
  for (int64_t i = First(); i < count * dim; i += Step())
    packed[i] = table[static_cast<int64_t>(rows[i / dim]) * dim + i % dim];
}

}  // namespace

cudaError_t Fill(float* data, int64_t n, float value, cudaStream_t stream) {
  return Launch(FillKernel, n, stream, data, n, value);
}

cudaError_t Multiply(float* data, const float* factor, int64_t n, cudaStream_t stream) {
  return Launch(MultiplyKernel, n, stream, data, factor, n);
}

cudaError_t AddBiasRows(float* y, const float* bias, int64_t rows, int64_t cols,
                        cudaStream_t stream) {
  return Launch(AddBiasRowsKernel, rows * cols, stream, y, bias, rows, cols);
}

cudaError_t Im2Col(const WindowShape& g, const float* in, int64_t samples, float* cols,
                   cudaStream_t stream) {
  const int64_t n = g.channels * g.kernel * g.kernel * samples * g.out_height * g.out_width;
  return Launch(Im2ColKernel, n, stream, g, in, samples, cols);
}

cudaError_t Col2Im(const WindowShape& g, const float* cols, int64_t samples, float* din,
                   cudaStream_t stream) {
  const int64_t n = samples * g.channels * g.height * g.width;
  return Launch(Col2ImKernel, n, stream, g, cols, samples, din);
}

cudaError_t GemmToSamples(const float* gemm, const float* bias, int64_t oc, int64_t samples,
                          int64_t positions, float* out, cudaStream_t stream) {
  return Launch(GemmToSamplesKernel, oc * samples * positions, stream, gemm, bias, oc, samples,
                positions, out);
}

cudaError_t SamplesToGemm(const float* in, int64_t oc, int64_t samples, int64_t positions,
                          float* gemm, cudaStream_t stream) {
  return Launch(SamplesToGemmKernel, oc * samples * positions, stream, in, oc, samples, positions,
                gemm);
}

cudaError_t MaxPoolForward(const WindowShape& g, int64_t planes, const float* in, float* out,
                           int32_t* argmax, cudaStream_t stream) {
  return Launch(PoolForwardKernel, planes * g.out_height * g.out_width, stream, g, planes, in, out,
                argmax);
}

cudaError_t MaxPoolBackward(const WindowShape& g, int64_t planes, const float* dout,
                            const int32_t* argmax, float* din, cudaStream_t stream) {
  return Launch(PoolBackwardKernel, planes * g.height * g.width, stream, g, planes, dout, argmax,
                din);
}

cudaError_t AvgPoolForward(const WindowShape& g, int64_t planes, const float* in, float* out,
                           cudaStream_t stream) {
  return Launch(PoolForwardKernel, planes * g.out_height * g.out_width, stream, g, planes, in, out,
                static_cast<int32_t*>(nullptr));
}

cudaError_t AvgPoolBackward(const WindowShape& g, int64_t planes, const float* dout, float* din,
                            cudaStream_t stream) {
  return Launch(PoolBackwardKernel, planes * g.height * g.width, stream, g, planes, dout,
                static_cast<const int32_t*>(nullptr), din);
}

cudaError_t ActivationForward(Activation kind, const float* in, int64_t n, float* out,
                              cudaStream_t stream) {
  return Launch(ActivationForwardKernel, n, stream, kind, in, n, out);
}

cudaError_t ActivationBackward(Activation kind, const float* y, const float* dy, int64_t n,
                               float* dx, cudaStream_t stream) {
  return Launch(ActivationBackwardKernel, n, stream, kind, y, dy, n, dx);
}

cudaError_t DropoutForward(const float* in, int64_t n, uint64_t stream_key, float rate, float* out,
                           float* mask, cudaStream_t stream) {
  const float scale = 1.0f / (1.0f - rate);
  return Launch(DropoutKernel, n, stream, in, n, stream_key, rate, scale, out, mask);
}

cudaError_t EmbeddingBagForward(const float* table, const int32_t* ids, int64_t samples,
                                int64_t fields, int64_t dim, bool concat, float scale, float* out,
                                cudaStream_t stream) {
  const int64_t width = concat ? fields * dim : dim;
  return Launch(EmbeddingBagForwardKernel, samples * width, stream, table, ids, samples, fields,
                dim, concat, scale, out);
}

cudaError_t EmbeddingBagBackward(const float* dout, const int32_t* start,
                                 const int32_t* occurrences, int64_t range, int64_t rows,
                                 int64_t fields, int64_t dim, bool concat, float scale, float* grad,
                                 cudaStream_t stream) {
  return Launch(EmbeddingBagBackwardKernel, rows * dim, stream, dout, start, occurrences, range,
                rows, fields, dim, concat, scale, grad);
}

cudaError_t ScatterRows(const float* packed, const int32_t* rows, int64_t count, int64_t dim,
                        float* table, cudaStream_t stream) {
  return Launch(ScatterRowsKernel, count * dim, stream, packed, rows, count, dim, table);
}

cudaError_t GatherRows(const float* table, const int32_t* rows, int64_t count, int64_t dim,
                       float* packed, cudaStream_t stream) {
  return Launch(GatherRowsKernel, count * dim, stream, table, rows, count, dim, packed);
}

cudaError_t SoftmaxCrossEntropy(const float* logits, const float* labels, int64_t rows,
                                int64_t classes, float* row_loss, float* grad,
                                cudaStream_t stream) {
  const float scale = 1.0f / static_cast<float>(rows);
  return Launch(SoftmaxKernel, rows, stream, logits, labels, rows, classes, scale, row_loss, grad);
}

cudaError_t BceWithLogits(const float* logits, const float* labels, int64_t rows, float* row_loss,
                          float* grad, cudaStream_t stream) {
  const float scale = 1.0f / static_cast<float>(rows);
  return Launch(BceKernel, rows, stream, logits, labels, rows, scale, row_loss, grad);
}

}  // namespace pstrain::gpu
