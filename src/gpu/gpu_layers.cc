// The GPU layers: matrix products by cuBLAS, the rest by kernels.cu.
//
// cuBLAS is column-major, the tensors row-major; a row-major matrix read
// column-major is its transpose, so row-major C = op(A) op(B) is computed as
// column-major C^T = op(B)^T op(A)^T: the operands swap places, no copies.
#include "src/gpu/gpu_layers.h"

#include <algorithm>

#include "src/common/random.h"
#include "src/gpu/kernels.h"

namespace pstrain::gpu {
namespace {

// Row-major C [m, n] = op(A) op(B) + beta C, op(A) [m, k], op(B) [k, n]; A
// is stored [k, m] when trans_a, B [n, k] when trans_b.
Status Gemm(cublasHandle_t blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
            const float* a, const float* b, float beta, float* c) {
  const float one = 1.0f;
  PSTRAIN_CUBLAS(cublasSgemm_64(blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, b,
                                trans_b ? k : n, a, trans_a ? m : k, &beta, c, n));
  return Status::OK();
}

// sums[j] (+)= the sum of column j of row-major `rows` x `cols` matrix a.
Status ColumnSums(GpuContext* context, const float* a, int64_t rows, int64_t cols, float beta,
                  float* sums) {
  auto ones = context->Ones(rows);
  if (!ones.ok()) return ones.status();
  const float one = 1.0f;
  PSTRAIN_CUBLAS(cublasSgemv_64(context->blas(), CUBLAS_OP_N, cols, rows, &one, a, cols, *ones, 1,
                                &beta, sums, 1));
  return Status::OK();
}

// sums[i] (+)= the sum of row i of row-major `rows` x `cols` matrix a.
Status RowSums(GpuContext* context, const float* a, int64_t rows, int64_t cols, float beta,
               float* sums) {
  auto ones = context->Ones(cols);
  if (!ones.ok()) return ones.status();
  const float one = 1.0f;
  PSTRAIN_CUBLAS(cublasSgemv_64(context->blas(), CUBLAS_OP_T, cols, rows, &one, a, cols, *ones, 1,
                                &beta, sums, 1));
  return Status::OK();
}

Status CopyTensor(const DeviceTensor& from, Shape shape, DeviceTensor* to, cudaStream_t stream) {
  PSTRAIN_RETURN_IF_ERROR(to->Resize(std::move(shape)));
  PSTRAIN_CUDA(cudaMemcpyAsync(to->ptr(), from.ptr(), sizeof(float) * from.size(),
                               cudaMemcpyDeviceToDevice, stream));
  return Status::OK();
}

// linear: y = x W^T + b, W [out, in].
class Linear : public GpuLayer {
 public:
  Linear(int64_t in, int64_t out, const std::vector<DeviceParam>& params, GpuContext* context)
      : in_(in), out_(out), params_(params), context_(context) {}

  Status Forward(const DeviceTensor& in, DeviceTensor* out, bool) override {
    const int64_t n = in.shape[0];
    PSTRAIN_RETURN_IF_ERROR(out->Resize({n, out_}));
    PSTRAIN_RETURN_IF_ERROR(
        Gemm(context_->blas(), false, true, n, out_, in_, in.ptr(), Weight(), 0.0f, out->ptr()));
    if (params_.size() < 2) return Status::OK();
    PSTRAIN_CUDA(AddBiasRows(out->ptr(), params_[1].value, n, out_, context_->stream()));
    return Status::OK();
  }

  Status Backward(const DeviceTensor& in, const DeviceTensor&, const DeviceTensor& dout,
                  DeviceTensor* din) override {
    const int64_t n = in.shape[0];
    PSTRAIN_RETURN_IF_ERROR(Gemm(context_->blas(), true, false, out_, in_, n, dout.ptr(), in.ptr(),
                                 0.0f, params_[0].grad));
    if (params_.size() > 1) {
      PSTRAIN_RETURN_IF_ERROR(ColumnSums(context_, dout.ptr(), n, out_, 0.0f, params_[1].grad));
    }
    if (din == nullptr) return Status::OK();
    PSTRAIN_RETURN_IF_ERROR(din->Resize(in.shape));
    return Gemm(context_->blas(), false, false, n, in_, out_, dout.ptr(), Weight(), 0.0f,
                din->ptr());
  }

 private:
  const float* Weight() const { return params_[0].value; }

  const int64_t in_, out_;
  const std::vector<DeviceParam> params_;
  GpuContext* const context_;
};

// conv2d as im2col + GEMM, a chunk of samples at a time (the columns of a
// chunk stay under kMaxColumns floats). Backward redoes im2col rather than
// keeping the columns: on the GPU that costs less than the memory.
//   forward:  Y [OC, P] = W [OC, taps] cols [taps, P]  (P = samples * Ho * Wo)
//   backward: dW += dY cols^T;  dcols = W^T dY;  db += row sums of dY
class Conv2d : public GpuLayer {
 public:
  Conv2d(const WindowShape& g, int64_t out_channels, const std::vector<DeviceParam>& params,
         GpuContext* context)
      : g_(g), oc_(out_channels), params_(params), context_(context) {}

  Status Forward(const DeviceTensor& in, DeviceTensor* out, bool) override {
    const int64_t n = in.shape[0];
    PSTRAIN_RETURN_IF_ERROR(out->Resize({n, oc_, g_.out_height, g_.out_width}));
    PSTRAIN_RETURN_IF_ERROR(Reserve(n));
    const float* bias = params_.size() > 1 ? params_[1].value : nullptr;
    for (int64_t first = 0; first < n; first += Chunk()) {
      const int64_t count = std::min(Chunk(), n - first), p = count * Positions();
      PSTRAIN_CUDA(Im2Col(g_, in.ptr() + first * InputSize(), count, cols_.get(), Stream()));
      PSTRAIN_RETURN_IF_ERROR(Gemm(context_->blas(), false, false, oc_, p, Taps(), params_[0].value,
                                   cols_.get(), 0.0f, gemm_.get()));
      PSTRAIN_CUDA(GemmToSamples(gemm_.get(), bias, oc_, count, Positions(),
                                 out->ptr() + first * OutputSize(), Stream()));
    }
    return Status::OK();
  }

  Status Backward(const DeviceTensor& in, const DeviceTensor&, const DeviceTensor& dout,
                  DeviceTensor* din) override {
    const int64_t n = in.shape[0];
    PSTRAIN_RETURN_IF_ERROR(Reserve(n));
    if (din != nullptr) PSTRAIN_RETURN_IF_ERROR(din->Resize(in.shape));
    for (int64_t first = 0; first < n; first += Chunk()) {
      const int64_t count = std::min(Chunk(), n - first), p = count * Positions();
      const float beta = first == 0 ? 0.0f : 1.0f;
      PSTRAIN_CUDA(Im2Col(g_, in.ptr() + first * InputSize(), count, cols_.get(), Stream()));
      PSTRAIN_CUDA(SamplesToGemm(dout.ptr() + first * OutputSize(), oc_, count, Positions(),
                                 gemm_.get(), Stream()));
      PSTRAIN_RETURN_IF_ERROR(Gemm(context_->blas(), false, true, oc_, Taps(), p, gemm_.get(),
                                   cols_.get(), beta, params_[0].grad));
      if (params_.size() > 1) {
        PSTRAIN_RETURN_IF_ERROR(RowSums(context_, gemm_.get(), oc_, p, beta, params_[1].grad));
      }
      if (din == nullptr) continue;
      // The stream runs the dW GEMM before this one overwrites cols_.
      PSTRAIN_RETURN_IF_ERROR(Gemm(context_->blas(), true, false, Taps(), p, oc_, params_[0].value,
                                   gemm_.get(), 0.0f, cols_.get()));
      PSTRAIN_CUDA(Col2Im(g_, cols_.get(), count, din->ptr() + first * InputSize(), Stream()));
    }
    return Status::OK();
  }

 private:
  static constexpr int64_t kMaxColumns = int64_t{1} << 26;  // 256 MiB

  int64_t Taps() const { return g_.channels * g_.kernel * g_.kernel; }
  int64_t Positions() const { return g_.out_height * g_.out_width; }
  int64_t InputSize() const { return g_.channels * g_.height * g_.width; }
  int64_t OutputSize() const { return oc_ * Positions(); }
  int64_t Chunk() const { return std::max<int64_t>(1, kMaxColumns / (Taps() * Positions())); }
  cudaStream_t Stream() const { return context_->stream(); }
  Status Reserve(int64_t n) {
    const int64_t count = std::min(n, Chunk());
    PSTRAIN_RETURN_IF_ERROR(cols_.Reserve(count * Taps() * Positions()));
    return gemm_.Reserve(count * OutputSize());
  }

  const WindowShape g_;
  const int64_t oc_;
  const std::vector<DeviceParam> params_;
  GpuContext* const context_;
  DeviceArray<float> cols_;  // a chunk's im2col, then (backward) its gradient
  DeviceArray<float> gemm_;  // a chunk's Y or dY, [OC][samples][Ho*Wo]
};

class Pool : public GpuLayer {
 public:
  Pool(bool max, const WindowShape& g, GpuContext* context) : max_(max), g_(g), context_(context) {}

  Status Forward(const DeviceTensor& in, DeviceTensor* out, bool) override {
    const int64_t n = in.shape[0], planes = n * g_.channels;
    PSTRAIN_RETURN_IF_ERROR(out->Resize({n, g_.channels, g_.out_height, g_.out_width}));
    if (!max_) {
      PSTRAIN_CUDA(AvgPoolForward(g_, planes, in.ptr(), out->ptr(), context_->stream()));
      return Status::OK();
    }
    PSTRAIN_RETURN_IF_ERROR(argmax_.Reserve(out->size()));
    PSTRAIN_CUDA(
        MaxPoolForward(g_, planes, in.ptr(), out->ptr(), argmax_.get(), context_->stream()));
    return Status::OK();
  }

  Status Backward(const DeviceTensor& in, const DeviceTensor&, const DeviceTensor& dout,
                  DeviceTensor* din) override {
    if (din == nullptr) return Status::OK();
    const int64_t planes = in.shape[0] * g_.channels;
    PSTRAIN_RETURN_IF_ERROR(din->Resize(in.shape));
    if (max_) {
      PSTRAIN_CUDA(
          MaxPoolBackward(g_, planes, dout.ptr(), argmax_.get(), din->ptr(), context_->stream()));
    } else {
      PSTRAIN_CUDA(AvgPoolBackward(g_, planes, dout.ptr(), din->ptr(), context_->stream()));
    }
    return Status::OK();
  }

 private:
  const bool max_;
  const WindowShape g_;
  GpuContext* const context_;
  DeviceArray<int32_t> argmax_;  // maxpool: per output, its index in its input plane
};

class ActivationLayer : public GpuLayer {
 public:
  ActivationLayer(Activation kind, GpuContext* context) : kind_(kind), context_(context) {}

  Status Forward(const DeviceTensor& in, DeviceTensor* out, bool) override {
    PSTRAIN_RETURN_IF_ERROR(out->Resize(in.shape));
    PSTRAIN_CUDA(ActivationForward(kind_, in.ptr(), in.size(), out->ptr(), context_->stream()));
    return Status::OK();
  }

  Status Backward(const DeviceTensor&, const DeviceTensor& out, const DeviceTensor& dout,
                  DeviceTensor* din) override {
    if (din == nullptr) return Status::OK();
    PSTRAIN_RETURN_IF_ERROR(din->Resize(out.shape));
    PSTRAIN_CUDA(ActivationBackward(kind_, out.ptr(), dout.ptr(), out.size(), din->ptr(),
                                    context_->stream()));
    return Status::OK();
  }

 private:
  const Activation kind_;
  GpuContext* const context_;
};

// The mask of the k-th training Forward is the CPU layer's (same key, same
// counter), so a GPU step drops the same elements as a CPU step.
class Dropout : public GpuLayer {
 public:
  Dropout(float rate, uint64_t key, GpuContext* context)
      : rate_(rate), key_(key), context_(context) {}

  Status Forward(const DeviceTensor& in, DeviceTensor* out, bool training) override {
    masked_ = training && rate_ > 0.0f;
    if (!masked_) return CopyTensor(in, in.shape, out, context_->stream());
    PSTRAIN_RETURN_IF_ERROR(out->Resize(in.shape));
    PSTRAIN_RETURN_IF_ERROR(mask_.Reserve(in.size()));
    const uint64_t stream_key = Mix64(key_ ^ Mix64(counter_++));
    PSTRAIN_CUDA(DropoutForward(in.ptr(), in.size(), stream_key, rate_, out->ptr(), mask_.get(),
                                context_->stream()));
    return Status::OK();
  }

  void SetTrainingForwards(uint64_t done) override { counter_ = done; }

  Status Backward(const DeviceTensor&, const DeviceTensor&, const DeviceTensor& dout,
                  DeviceTensor* din) override {
    if (din == nullptr) return Status::OK();
    PSTRAIN_RETURN_IF_ERROR(CopyTensor(dout, dout.shape, din, context_->stream()));
    if (masked_) PSTRAIN_CUDA(Multiply(din->ptr(), mask_.get(), din->size(), context_->stream()));
    return Status::OK();
  }

 private:
  const float rate_;
  const uint64_t key_;
  GpuContext* const context_;
  uint64_t counter_ = 0;  // training Forwards so far
  bool masked_ = false;   // whether the last Forward applied mask_
  DeviceArray<float> mask_;
};

class Flatten : public GpuLayer {
 public:
  Flatten(int64_t features, GpuContext* context) : features_(features), context_(context) {}

  Status Forward(const DeviceTensor& in, DeviceTensor* out, bool) override {
    return CopyTensor(in, {in.shape[0], features_}, out, context_->stream());
  }

  Status Backward(const DeviceTensor& in, const DeviceTensor&, const DeviceTensor& dout,
                  DeviceTensor* din) override {
    if (din == nullptr) return Status::OK();
    return CopyTensor(dout, in.shape, din, context_->stream());
  }

 private:
  const int64_t features_;
  GpuContext* const context_;
};

// [N, F] + the batch's dense features [N, D] -> [N, F + D]: two strided
// copies each way.
class Concat : public GpuLayer {
 public:
  Concat(int64_t in, int64_t dense, GpuContext* context)
      : in_(in), dense_(dense), context_(context) {}

  Status Forward(const DeviceTensor& in, DeviceTensor* out, bool) override {
    const int64_t n = in.shape[0], width = in_ + dense_;
    const DeviceTensor* dense = context_->batch().dense;
    if (dense == nullptr || dense->shape.empty() || dense->shape[0] != n ||
        dense->size() != n * dense_) {
      return Internal("concat: the batch's dense features do not fit");
    }
    PSTRAIN_RETURN_IF_ERROR(out->Resize({n, width}));
    PSTRAIN_CUDA(Strided(out->ptr(), width, in.ptr(), in_, in_, n));
    PSTRAIN_CUDA(Strided(out->ptr() + in_, width, dense->ptr(), dense_, dense_, n));
    return Status::OK();
  }

  Status Backward(const DeviceTensor& in, const DeviceTensor&, const DeviceTensor& dout,
                  DeviceTensor* din) override {
    if (din == nullptr) return Status::OK();
    PSTRAIN_RETURN_IF_ERROR(din->Resize(in.shape));
    PSTRAIN_CUDA(Strided(din->ptr(), in_, dout.ptr(), in_ + dense_, in_, in.shape[0]));
    return Status::OK();
  }

 private:
  // `rows` rows of `count` floats, row pitches in floats.
  cudaError_t Strided(float* to, int64_t to_pitch, const float* from, int64_t from_pitch,
                      int64_t count, int64_t rows) {
    return cudaMemcpy2DAsync(to, sizeof(float) * to_pitch, from, sizeof(float) * from_pitch,
                             sizeof(float) * count, rows, cudaMemcpyDeviceToDevice,
                             context_->stream());
  }

  const int64_t in_, dense_;
  GpuContext* const context_;
};

// embedding_bag on a [rows, dim] table (kernels.h); the ids and where each
// occurs come with the batch (DeviceBatch). As on the CPU, the gradient is
// the whole table's, dense.
class EmbeddingBag : public GpuLayer {
 public:
  EmbeddingBag(int64_t rows, int64_t fields, int64_t dim, bool concat, float scale,
               const std::vector<DeviceParam>& params, GpuContext* context)
      : rows_(rows),
        fields_(fields),
        dim_(dim),
        concat_(concat),
        scale_(scale),
        params_(params),
        context_(context) {}

  Status Forward(const DeviceTensor&, DeviceTensor* out, bool) override {
    const DeviceBatch& b = context_->batch();
    if (b.ids == nullptr || b.fields != fields_ || b.range > rows_) {
      return Internal("embedding_bag: the batch's ids do not fit the table");
    }
    PSTRAIN_RETURN_IF_ERROR(out->Resize({b.samples, concat_ ? fields_ * dim_ : dim_}));
    PSTRAIN_CUDA(EmbeddingBagForward(params_[0].value, b.ids, b.samples, fields_, dim_, concat_,
                                     scale_, out->ptr(), context_->stream()));
    return Status::OK();
  }

  Status Backward(const DeviceTensor& in, const DeviceTensor&, const DeviceTensor& dout,
                  DeviceTensor* din) override {
    const DeviceBatch& b = context_->batch();
    if (b.id_start == nullptr) return Internal("embedding_bag: no id occurrences for backward");
    PSTRAIN_CUDA(EmbeddingBagBackward(dout.ptr(), b.id_start, b.occurrences, b.range, rows_,
                                      fields_, dim_, concat_, scale_, params_[0].grad,
                                      context_->stream()));
    if (din == nullptr) return Status::OK();
    PSTRAIN_RETURN_IF_ERROR(din->Resize(in.shape));  // the ids are not differentiable
    PSTRAIN_CUDA(Fill(din->ptr(), din->size(), 0.0f, context_->stream()));
    return Status::OK();
  }

 private:
  const int64_t rows_, fields_, dim_;
  const bool concat_;
  const float scale_;
  const std::vector<DeviceParam> params_;
  GpuContext* const context_;
};

WindowShape Window(const LayerConfig& c, const Shape& input, const Shape& output) {
  const int default_stride = c.type == LayerType::kConv2d ? 1 : c.kernel;
  return WindowShape{
      input[0],  input[1],  input[2], c.kernel, c.stride > 0 ? c.stride : default_stride,
      c.padding, output[1], output[2]};
}

}  // namespace

StatusOr<const float*> GpuContext::Ones(int64_t n) {
  if (n > ones_size_) {
    PSTRAIN_RETURN_IF_ERROR(ones_.Reserve(n));
    PSTRAIN_CUDA(Fill(ones_.get(), n, 1.0f, stream_));
    ones_size_ = n;
  }
  return static_cast<const float*>(ones_.get());
}

std::unique_ptr<GpuLayer> MakeGpuLayer(const LayerConfig& c, const Shape& input,
                                       const Shape& output, const std::vector<DeviceParam>& params,
                                       uint64_t seed, GpuContext* context) {
  switch (c.type) {
    case LayerType::kLinear:
      return std::make_unique<Linear>(NumElements(input), c.out, params, context);
    case LayerType::kConv2d:
      return std::make_unique<Conv2d>(Window(c, input, output), c.out_channels, params, context);
    case LayerType::kMaxpool:
    case LayerType::kAvgpool:
      return std::make_unique<Pool>(c.type == LayerType::kMaxpool, Window(c, input, output),
                                    context);
    case LayerType::kRelu:
      return std::make_unique<ActivationLayer>(Activation::kRelu, context);
    case LayerType::kSigmoid:
      return std::make_unique<ActivationLayer>(Activation::kSigmoid, context);
    case LayerType::kTanh:
      return std::make_unique<ActivationLayer>(Activation::kTanh, context);
    case LayerType::kDropout:
      return std::make_unique<Dropout>(c.rate, StreamKey(seed, c.name), context);
    case LayerType::kFlatten:
      return std::make_unique<Flatten>(NumElements(input), context);
    case LayerType::kConcat:
      return std::make_unique<Concat>(NumElements(input), NumElements(output) - NumElements(input),
                                      context);
    case LayerType::kEmbeddingBag: {
      const int64_t fields = input.empty() ? 0 : input[0];
      const float scale = c.mode == "mean" ? 1.0f / static_cast<float>(fields) : 1.0f;
      return std::make_unique<EmbeddingBag>(c.vocab, fields, c.dim, c.mode == "concat", scale,
                                            params, context);
    }
    case LayerType::kGelu:
    case LayerType::kLayerNorm:
    case LayerType::kResidual:
    case LayerType::kAugment:
    case LayerType::kBatchNorm:
      break;  // CheckGpuModelSupported refuses them
  }
  return nullptr;  // an unknown type: the CPU layer was refused first
}

}  // namespace pstrain::gpu
