// Internal to src/gpu: the CUDA kernels of the layers and losses, behind
// host functions that queue them on a stream and return the launch error.
// Index conventions are the CPU layers' (src/nn): tensors row-major with
// the batch first, conv weights [OC, C, k, k], im2col rows per tap.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pstrain::gpu {

// One convolution or pooling window geometry (square kernel).
struct WindowShape {
  int64_t channels, height, width;
  int64_t kernel, stride, padding;
  int64_t out_height, out_width;
};

enum class Activation { kRelu, kSigmoid, kTanh };

cudaError_t Fill(float* data, int64_t n, float value, cudaStream_t stream);
// data[i] *= factor[i].
cudaError_t Multiply(float* data, const float* factor, int64_t n, cudaStream_t stream);
// y[r, c] += bias[c] for rows x cols.
cudaError_t AddBiasRows(float* y, const float* bias, int64_t rows, int64_t cols,
                        cudaStream_t stream);

// cols [C*k*k, samples*Ho*Wo] from images [samples, C, H, W]; zeros where
// a tap falls in the padding.
cudaError_t Im2Col(const WindowShape& g, const float* in, int64_t samples, float* cols,
                   cudaStream_t stream);
// din [samples, C, H, W] = the sum of every column entry read from it
// (overwrites din).
cudaError_t Col2Im(const WindowShape& g, const float* cols, int64_t samples, float* din,
                   cudaStream_t stream);
// The conv GEMM's [OC][samples][P] <-> the tensor's [samples][OC][P]. The
// forward direction adds bias[oc] (bias may be null).
cudaError_t GemmToSamples(const float* gemm, const float* bias, int64_t oc, int64_t samples,
                          int64_t positions, float* out, cudaStream_t stream);
cudaError_t SamplesToGemm(const float* in, int64_t oc, int64_t samples, int64_t positions,
                          float* gemm, cudaStream_t stream);

// Pooling over samples * channels planes. maxpool records, per output, the
// index of the maximum in its input plane (the first of equal values).
cudaError_t MaxPoolForward(const WindowShape& g, int64_t planes, const float* in, float* out,
                           int32_t* argmax, cudaStream_t stream);
cudaError_t MaxPoolBackward(const WindowShape& g, int64_t planes, const float* dout,
                            const int32_t* argmax, float* din, cudaStream_t stream);
// avgpool divides by kernel * kernel, padding counting as zeros.
cudaError_t AvgPoolForward(const WindowShape& g, int64_t planes, const float* in, float* out,
                           cudaStream_t stream);
cudaError_t AvgPoolBackward(const WindowShape& g, int64_t planes, const float* dout, float* din,
                            cudaStream_t stream);

cudaError_t ActivationForward(Activation kind, const float* in, int64_t n, float* out,
                              cudaStream_t stream);
// From the forward output y: dx = dy * f'(x) written as a function of y.
cudaError_t ActivationBackward(Activation kind, const float* y, const float* dy, int64_t n,
                               float* dx, cudaStream_t stream);

// Inverted dropout with the CPU layer's mask: element i is dropped when
// UnitFloat(Mix64(stream_key + i)) < rate, else scaled by 1 / (1 - rate);
// mask receives 0 or the scale.
cudaError_t DropoutForward(const float* in, int64_t n, uint64_t stream_key, float rate, float* out,
                           float* mask, cudaStream_t stream);

// embedding_bag over a [rows, dim] table and the batch's ids [samples,
// fields]. concat: out [samples, fields * dim], field f's row at f * dim;
// otherwise out [samples, dim], the sum of the fields' rows in field order,
// then times `scale` (1 for sum, 1 / fields for mean), as the CPU layer.
cudaError_t EmbeddingBagForward(const float* table, const int32_t* ids, int64_t samples,
                                int64_t fields, int64_t dim, bool concat, float scale, float* out,
                                cudaStream_t stream);
// The table's gradient [rows, dim], overwritten: row r < range adds up, in
// the order of occurrences[start[r] .. start[r + 1]) (each s * fields + f,
// in batch order, as the CPU layer adds them), dout's entry of that field
// (concat) or sample times `scale`; rows >= range get zeros. One thread per
// gradient element: no atomics, so the sums do not depend on scheduling.
cudaError_t EmbeddingBagBackward(const float* dout, const int32_t* start,
                                 const int32_t* occurrences, int64_t range, int64_t rows,
                                 int64_t fields, int64_t dim, bool concat, float scale, float* grad,
                                 cudaStream_t stream);

// Rows of a [*, dim] table by index: table[rows[k]] = packed[k] (scatter)
// and packed[k] = table[rows[k]] (gather), for k < count. The rows are
// distinct, so no two threads write one element.
cudaError_t ScatterRows(const float* packed, const int32_t* rows, int64_t count, int64_t dim,
                        float* table, cudaStream_t stream);
cudaError_t GatherRows(const float* table, const int32_t* rows, int64_t count, int64_t dim,
                       float* packed, cudaStream_t stream);

// Per-row loss into row_loss[rows] and d(mean loss)/d(logits) into grad
// (scaled by 1 / rows). Labels: class indices (softmax) or 0/1 (bce, one
// column).
cudaError_t SoftmaxCrossEntropy(const float* logits, const float* labels, int64_t rows,
                                int64_t classes, float* row_loss, float* grad, cudaStream_t stream);
cudaError_t BceWithLogits(const float* logits, const float* labels, int64_t rows, float* row_loss,
                          float* grad, cudaStream_t stream);

}  // namespace pstrain::gpu
