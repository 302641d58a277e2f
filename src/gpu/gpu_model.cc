// CudaModel, the module's side of GpuModel: the layers of gpu_layers.cc in
// order, the loss, and the copies between the host Params and the device.
//
// Every parameter lives in one flat device array of values and one of
// grads: the dense params first, in the order of the host params, then the
// embedding_bag tables, whose rows travel as table_rows.h says. The dense
// params' host <-> device copies go through one pinned staging array; each
// public call ends by waiting for its stream, so the staging array is free
// again when the next call begins.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "src/common/batch.h"
#include "src/common/config/model_config.h"
#include "src/common/tensor.h"
#include "src/gpu/copy_timer.h"
#include "src/gpu/cuda_backend.h"
#include "src/gpu/cuda_util.h"
#include "src/gpu/gpu_layers.h"
#include "src/gpu/kernels.h"
#include "src/gpu/table_rows.h"
#include "src/nn/layer.h"
#include "src/nn/layers.h"  // CreateLayer, ShapeString
#include "src/nn/loss.h"
#include "src/nn/model.h"  // NamedLayers

namespace pstrain {

using gpu::DeviceArray;
using gpu::DeviceTensor;

namespace {

// A sequential list of GpuLayers and the tensors between them: the model's
// one, or its wide and deep towers (their logits are added).
struct Tower {
  std::vector<std::unique_ptr<gpu::GpuLayer>> layers;
  std::vector<DeviceTensor> outs;   // outs[i]: layer i's output
  std::vector<DeviceTensor> douts;  // douts[i]: dL/d outs[i]
};

// Fields are open to Build below; the rest of the module sees only the
// ModelBackend.
class CudaModel final : public gpu::ModelBackend {
 public:
  ~CudaModel() override {
    towers.clear();
    context.reset();
    if (blas != nullptr) cublasDestroy(blas);
    if (device_stream != nullptr) cudaStreamDestroy(device_stream);
  }

  Status UploadWeights() override;
  StatusOr<GpuModel::PinnedTable> PinTable(size_t index) override {
    if (index >= params.size() || !table_rows.Has(index)) {
      return InvalidArgument("PinTable: " +
                             (index < params.size() ? "param " + params[index]->name
                                                    : "param " + std::to_string(index)) +
                             " is not an embedding_bag table");
    }
    return table_rows.Pin(index);
  }
  StatusOr<const Tensor*> Forward(const Batch& batch, bool training) override;
  StatusOr<float> Backward(const Batch& batch,
                           const std::function<Status(size_t, float*, int64_t)>& on_device_grads,
                           const std::function<bool(size_t)>& reduced_on_device) override;
  GpuStream stream() const override { return device_stream; }
  double CopySeconds() const override { return copies.seconds(); }
  int64_t CopiedBytes() const override { return copies.bytes(); }
  void SetTrainingForwards(uint64_t done) override {
    for (Tower& t : towers)
      for (auto& layer : t.layers) layer->SetTrainingForwards(done);
  }

  LossType loss = LossType::kSoftmaxCrossEntropy;
  Shape input, output;                   // one sample's
  int64_t fields = 0;                    // sparse ids per sample, 0: no embedding_bag
  int64_t vocab = 0;                     // with ids: the smallest embedding table's rows
  std::vector<Param*> params;            // the host's, not owned
  std::vector<int64_t> offsets;          // params[i] at offsets[i] in values and grads
  std::vector<bool> is_table;            // params[i] is an embedding_bag table
  int64_t dense = 0;                     // floats of the other params: offsets below it
  int64_t total = 0;                     // floats of all params
  cudaStream_t device_stream = nullptr;  // owned
  cublasHandle_t blas = nullptr;         // owned
  std::unique_ptr<gpu::GpuContext> context;
  DeviceArray<float> values, grads;
  std::vector<Tower> towers;
  DeviceTensor batch;  // the last Forward's dense input
  DeviceTensor sum;    // two towers: their logits added
  // The last Forward's ids and (training) each id's occurrences: [ids |
  // start | occurrences] as DeviceBatch describes them.
  DeviceArray<int32_t> ids;
  DeviceArray<float> labels, row_loss;
  gpu::PinnedArray<float> staging;
  gpu::PinnedArray<int32_t> id_staging;
  std::vector<int32_t> cursor;  // scratch of the occurrences' counting sort
  Tensor logits;                // host copy of the last Forward's output
  int64_t trained_rows = -1;    // rows of the last Forward(training), -1: none since
  gpu::CopyTimer copies;
  gpu::TableRows table_rows;

 private:
  Status Wait() {
    return gpu::CudaStatus(cudaStreamSynchronize(device_stream), "cudaStreamSynchronize");
  }
  const DeviceTensor& Logits() const { return towers.size() == 1 ? towers[0].outs.back() : sum; }
  // Queues the batch's ids (and, for training, where each occurs) and the
  // tables' rows they name, and tells the layers where the batch is.
  Status UploadIds(const Batch& batch, int64_t n, bool training);
};

// One layer's shapes and which host params are its own, found by building
// the CPU layer (so shapes and names follow src/nn exactly).
struct LayerPlan {
  LayerConfig config;  // with its default name
  Shape input, output;
  std::vector<size_t> params;  // indices into the host params: weight, bias
};

// The layers of each tower: the sequential list, or wide then deep.
StatusOr<std::vector<std::vector<LayerPlan>>> Plan(const ModelConfig& config,
                                                   const std::vector<Param*>& params,
                                                   uint64_t seed) {
  std::vector<std::vector<LayerPlan>> towers;
  std::vector<bool> used(params.size(), false);
  const std::vector<LayerConfig> named = NamedLayers(config);  // the host Model's names
  const LayerContext context{config.input};
  size_t next = 0;
  for (const std::vector<LayerConfig>* list : {&config.layers, &config.wide, &config.deep}) {
    if (list->empty()) continue;
    std::vector<LayerPlan>& plans = towers.emplace_back();
    Shape shape = config.input;
    for (size_t i = 0; i < list->size(); ++i) {
      LayerPlan plan{named[next++], shape, {}, {}};
      const std::string where = "layer " + plan.config.name;
      if (plan.config.type == LayerType::kEmbeddingBag) {
        // As the host Model: it reads the sparse ids, so it comes first.
        if (i != 0 || config.sparse_fields <= 0) {
          return InvalidArgument(where + ": embedding_bag must come first and needs sparse_fields");
        }
        plan.input = {config.sparse_fields};
      }
      auto host = CreateLayer(plan.config, context);
      if (!host.ok()) return host.status().WithContext(where);
      auto output = (*host)->Build(plan.input, seed);
      if (!output.ok()) return output.status().WithContext(where);
      for (const Param* mine : (*host)->Params()) {
        size_t k = 0;
        while (k < params.size() && params[k]->name != mine->name) ++k;
        if (k == params.size() || params[k]->value.shape != mine->value.shape) {
          return InvalidArgument(where + ": the host model has no param " + mine->name +
                                 " of shape " + ShapeString(mine->value.shape));
        }
        used[k] = true;
        plan.params.push_back(k);
      }
      plan.output = shape = *output;
      plans.push_back(std::move(plan));
    }
  }
  for (size_t k = 0; k < params.size(); ++k) {
    if (!used[k]) return InvalidArgument("param " + params[k]->name + " belongs to no layer");
  }
  if (towers.empty()) return InvalidArgument("model: no layers");
  return towers;
}

}  // namespace

// The front checked CheckGpuModelSupported(config).
StatusOr<std::unique_ptr<gpu::ModelBackend>> gpu::CudaBackend::BuildModel(
    const ModelConfig& config, const std::vector<Param*>& params, uint64_t seed) const {
  auto plans = Plan(config, params, seed);
  if (!plans.ok()) return plans.status();
  const Shape& logits = plans->back().back().output;
  for (const std::vector<LayerPlan>& tower : *plans) {
    const Shape& out = tower.back().output;
    const bool fits = config.loss == LossType::kBceWithLogits
                          ? out == Shape{1}
                          : out.size() == 1 && out[0] >= 2 && plans->size() == 1;
    if (!fits) {
      return InvalidArgument("model: output " + ShapeString(out) + " does not fit " +
                             LossTypeName(config.loss));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(CheckVisible());

  auto impl = std::make_unique<CudaModel>();
  impl->loss = config.loss;
  impl->input = config.input;
  impl->output = logits;
  impl->params = params;
  impl->is_table.assign(params.size(), false);
  for (const std::vector<LayerPlan>& tower : *plans)
    for (const LayerPlan& plan : tower)
      if (plan.config.type == LayerType::kEmbeddingBag)
        for (size_t k : plan.params) impl->is_table[k] = true;
  impl->offsets.resize(params.size());
  for (bool tables : {false, true}) {
    if (tables) impl->dense = impl->total;
    for (size_t k = 0; k < params.size(); ++k) {
      if (impl->is_table[k] != tables) continue;
      impl->offsets[k] = impl->total;
      impl->total += params[k]->value.size();
    }
  }
  PSTRAIN_CUDA(cudaSetDevice(0));
  PSTRAIN_CUDA(cudaStreamCreate(&impl->device_stream));
  PSTRAIN_CUBLAS(cublasCreate(&impl->blas));
  PSTRAIN_CUBLAS(cublasSetStream(impl->blas, impl->device_stream));
  // Plain float32 products: TF32 tensor cores would round inputs to 10-bit
  // mantissas and the gradients would no longer match the CPU's.
  PSTRAIN_CUBLAS(cublasSetMathMode(impl->blas, CUBLAS_DEFAULT_MATH));
  impl->context = std::make_unique<gpu::GpuContext>(impl->device_stream, impl->blas);
  PSTRAIN_RETURN_IF_ERROR(impl->values.Reserve(impl->total));
  PSTRAIN_RETURN_IF_ERROR(impl->grads.Reserve(impl->total));
  for (const std::vector<LayerPlan>& plans_of_tower : *plans) {
    Tower& tower = impl->towers.emplace_back();
    for (const LayerPlan& plan : plans_of_tower) {
      if (plan.config.type == LayerType::kEmbeddingBag) {
        impl->fields = config.sparse_fields;
        impl->vocab =
            impl->vocab == 0 ? plan.config.vocab : std::min(impl->vocab, plan.config.vocab);
      }
      std::vector<gpu::DeviceParam> device;
      for (size_t k : plan.params) {
        device.push_back(
            {impl->values.get() + impl->offsets[k], impl->grads.get() + impl->offsets[k]});
        if (impl->is_table[k]) {
          impl->table_rows.Add(k, params[k], plan.config.vocab, plan.config.dim,
                               device.back().value, device.back().grad);
        }
      }
      tower.layers.push_back(gpu::MakeGpuLayer(plan.config, plan.input, plan.output, device, seed,
                                               impl->context.get()));
    }
    tower.outs.resize(tower.layers.size());
    tower.douts.resize(tower.layers.size());
  }
  if (impl->vocab > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("model: an embedding_bag of " + std::to_string(impl->vocab) +
                           " rows is more than the GPU path indexes (2^31 - 1)");
  }
  PSTRAIN_RETURN_IF_ERROR(impl->table_rows.Reserve());
  PSTRAIN_RETURN_IF_ERROR(impl->UploadWeights());
  return std::unique_ptr<gpu::ModelBackend>(std::move(impl));
}

Status CudaModel::UploadWeights() {
  CudaModel& m = *this;
  m.copies.Begin();
  PSTRAIN_RETURN_IF_ERROR(m.staging.Reserve(m.dense));
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (m.is_table[i]) continue;
    const Tensor& v = m.params[i]->value;
    std::memcpy(m.staging.get() + m.offsets[i], v.ptr(), sizeof(float) * v.size());
  }
  PSTRAIN_RETURN_IF_ERROR(m.copies.Copy(m.values.get(), m.staging.get(), sizeof(float) * m.dense,
                                        cudaMemcpyHostToDevice, m.device_stream));
  PSTRAIN_RETURN_IF_ERROR(m.Wait());
  return m.copies.Collect();
}

// The ids go up as int32, checked here: on the device an id past its table
// would read (or, in backward, mean) memory that is not the table's. For a
// training Forward, a counting sort groups each id's occurrences, in batch
// order, so that backward adds them in the CPU layer's order.
Status CudaModel::UploadIds(const Batch& batch, int64_t n, bool training) {
  gpu::DeviceBatch view;
  view.samples = n;
  view.dense = &this->batch;
  if (fields == 0) {
    context->set_batch(view);
    return Status::OK();
  }
  const int64_t count = n * fields;
  if (batch.fields != fields || static_cast<int64_t>(batch.sparse.size()) != count) {
    return InvalidArgument("GPU forward: " + std::to_string(batch.sparse.size()) +
                           " sparse ids of " + std::to_string(batch.fields) + " fields for " +
                           std::to_string(n) + " samples; the model reads " +
                           std::to_string(fields) + " per sample");
  }
  if (!batch.sparse_weights.empty()) {
    return InvalidArgument(
        "GPU forward: the ids carry weights (multi_hot columns or libsvm data), which the GPU "
        "embedding kernels do not apply; train this model with device: cpu");
  }
  int64_t range = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t id = batch.sparse[i];
    if (id < 0 || id >= vocab) {
      return InvalidArgument("GPU forward: sparse id " + std::to_string(id) + " of sample " +
                             std::to_string(i / fields) + " is outside the embedding table [0, " +
                             std::to_string(vocab) + ")");
    }
    range = std::max(range, id + 1);
  }
  const int64_t size = training ? 2 * count + range + 1 : count;
  PSTRAIN_RETURN_IF_ERROR(id_staging.Reserve(size));
  PSTRAIN_RETURN_IF_ERROR(ids.Reserve(size));
  int32_t* host = id_staging.get();
  for (int64_t i = 0; i < count; ++i) host[i] = static_cast<int32_t>(batch.sparse[i]);
  if (training) {
    int32_t* start = host + count;
    int32_t* occurrences = start + range + 1;
    std::fill(start, start + range + 1, 0);
    for (int64_t i = 0; i < count; ++i) ++start[host[i] + 1];
    for (int64_t r = 0; r < range; ++r) start[r + 1] += start[r];
    cursor.assign(start, start + range);
    for (int64_t i = 0; i < count; ++i) occurrences[cursor[host[i]]++] = static_cast<int32_t>(i);
    view.range = range;
    view.id_start = ids.get() + count;
    view.occurrences = ids.get() + count + range + 1;
  }
  PSTRAIN_RETURN_IF_ERROR(
      copies.Copy(ids.get(), host, sizeof(int32_t) * size, cudaMemcpyHostToDevice, device_stream));
  PSTRAIN_RETURN_IF_ERROR(table_rows.Upload(host, count, range, training ? host + count : nullptr,
                                            device_stream, &copies));
  view.ids = ids.get();
  view.fields = fields;
  if (!training) view.range = range;
  context->set_batch(view);
  return Status::OK();
}

StatusOr<const Tensor*> CudaModel::Forward(const Batch& batch, bool training) {
  CudaModel& m = *this;
  const Tensor& dense = batch.dense;
  const int64_t n = dense.shape.empty() ? 0 : dense.shape[0];
  Shape expected{n};
  expected.insert(expected.end(), m.input.begin(), m.input.end());
  if (n <= 0 || dense.shape != expected || dense.size() != NumElements(expected)) {
    return InvalidArgument("GPU forward: batch " + ShapeString(dense.shape) +
                           " does not fit the model's input " + ShapeString(m.input));
  }
  m.trained_rows = -1;
  m.copies.Begin();
  PSTRAIN_RETURN_IF_ERROR(m.batch.Resize(dense.shape));
  // Grown before anything is queued: growing frees the old array.
  PSTRAIN_RETURN_IF_ERROR(
      m.staging.Reserve(n * std::max(NumElements(m.input), NumElements(m.output))));
  std::memcpy(m.staging.get(), dense.ptr(), sizeof(float) * dense.size());
  PSTRAIN_RETURN_IF_ERROR(m.copies.Copy(m.batch.ptr(), m.staging.get(),
                                        sizeof(float) * dense.size(), cudaMemcpyHostToDevice,
                                        m.device_stream));
  PSTRAIN_RETURN_IF_ERROR(m.UploadIds(batch, n, training));
  for (Tower& t : m.towers) {
    for (size_t i = 0; i < t.layers.size(); ++i) {
      const DeviceTensor& in = i == 0 ? m.batch : t.outs[i - 1];
      PSTRAIN_RETURN_IF_ERROR(t.layers[i]->Forward(in, &t.outs[i], training));
    }
  }
  if (m.towers.size() == 2) {
    // wide + deep, as the CPU adds them (1 * deep + wide is exact).
    const DeviceTensor& wide = m.towers[0].outs.back();
    const DeviceTensor& deep = m.towers[1].outs.back();
    PSTRAIN_RETURN_IF_ERROR(m.sum.Resize(wide.shape));
    PSTRAIN_CUDA(cudaMemcpyAsync(m.sum.ptr(), wide.ptr(), sizeof(float) * wide.size(),
                                 cudaMemcpyDeviceToDevice, m.device_stream));
    const float one = 1.0f;
    PSTRAIN_CUBLAS(cublasSaxpy_64(m.blas, deep.size(), &one, deep.ptr(), 1, m.sum.ptr(), 1));
  }
  const DeviceTensor& out = m.Logits();
  m.logits.Resize(out.shape);
  PSTRAIN_RETURN_IF_ERROR(m.copies.Copy(m.staging.get(), out.ptr(), sizeof(float) * out.size(),
                                        cudaMemcpyDeviceToHost, m.device_stream));
  PSTRAIN_RETURN_IF_ERROR(m.Wait());
  PSTRAIN_RETURN_IF_ERROR(m.copies.Collect());
  std::memcpy(m.logits.ptr(), m.staging.get(), sizeof(float) * out.size());
  if (training) m.trained_rows = n;
  return &m.logits;
}

StatusOr<float> CudaModel::Backward(
    const Batch& batch, const std::function<Status(size_t, float*, int64_t)>& on_device_grads,
    const std::function<bool(size_t)>& reduced_on_device) {
  CudaModel& m = *this;
  const int64_t n = batch.size();
  if (m.trained_rows < 0 || n != m.trained_rows) {
    return FailedPrecondition("GPU backward needs a Forward(batch, training) of the same batch");
  }
  // The CPU loss's rule (src/nn/loss.h), before any label reaches a kernel.
  PSTRAIN_RETURN_IF_ERROR(CheckLabels(m.loss, m.logits.shape[1], batch.labels));
  m.copies.Begin();
  const int64_t classes = m.logits.shape[1];
  PSTRAIN_RETURN_IF_ERROR(m.labels.Reserve(n));
  PSTRAIN_RETURN_IF_ERROR(m.row_loss.Reserve(n));
  PSTRAIN_RETURN_IF_ERROR(m.staging.Reserve(m.dense + n));
  std::memcpy(m.staging.get(), batch.labels.data(), sizeof(float) * n);
  PSTRAIN_RETURN_IF_ERROR(m.copies.Copy(m.labels.get(), m.staging.get(), sizeof(float) * n,
                                        cudaMemcpyHostToDevice, m.device_stream));
  // The logits' gradient goes to the last layer of every tower (a sum
  // passes it on unchanged).
  DeviceTensor& dlogits = m.towers[0].douts.back();
  PSTRAIN_RETURN_IF_ERROR(dlogits.Resize(m.logits.shape));
  const float* logits = m.Logits().ptr();
  if (m.loss == LossType::kSoftmaxCrossEntropy) {
    PSTRAIN_CUDA(gpu::SoftmaxCrossEntropy(logits, m.labels.get(), n, classes, m.row_loss.get(),
                                          dlogits.ptr(), m.device_stream));
  } else {
    PSTRAIN_CUDA(gpu::BceWithLogits(logits, m.labels.get(), n, m.row_loss.get(), dlogits.ptr(),
                                    m.device_stream));
  }
  for (Tower& t : m.towers) {
    for (size_t i = t.layers.size(); i-- > 0;) {
      const DeviceTensor& in = i == 0 ? m.batch : t.outs[i - 1];
      const DeviceTensor& dout = i + 1 == t.layers.size() ? dlogits : t.douts[i];
      DeviceTensor* din = i == 0 ? nullptr : &t.douts[i - 1];
      PSTRAIN_RETURN_IF_ERROR(t.layers[i]->Backward(in, t.outs[i], dout, din));
    }
  }
  for (size_t i = 0; on_device_grads && i < m.params.size(); ++i) {
    Status s = on_device_grads(i, m.grads.get() + m.offsets[i], m.params[i]->grad.size());
    if (!s.ok()) return s.WithContext("gradient of " + m.params[i]->name);
  }
  PSTRAIN_RETURN_IF_ERROR(m.copies.Copy(m.staging.get(), m.grads.get(), sizeof(float) * m.dense,
                                        cudaMemcpyDeviceToHost, m.device_stream));
  PSTRAIN_RETURN_IF_ERROR(m.copies.Copy(m.staging.get() + m.dense, m.row_loss.get(),
                                        sizeof(float) * n, cudaMemcpyDeviceToHost,
                                        m.device_stream));
  // A table that on_device_grads may have all-reduced holds other ranks'
  // rows too: it comes down whole.
  const std::function<bool(size_t)> whole = [&](size_t i) {
    return on_device_grads && (!reduced_on_device || reduced_on_device(i));
  };
  PSTRAIN_RETURN_IF_ERROR(m.table_rows.QueueGrads(whole, m.device_stream, &m.copies));
  PSTRAIN_RETURN_IF_ERROR(m.Wait());
  PSTRAIN_RETURN_IF_ERROR(m.copies.Collect());
  m.trained_rows = -1;
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (m.is_table[i]) continue;
    Tensor& g = m.params[i]->grad;
    std::memcpy(g.ptr(), m.staging.get() + m.offsets[i], sizeof(float) * g.size());
  }
  m.table_rows.FinishGrads();
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += m.staging.get()[m.dense + i];
  return static_cast<float>(total / static_cast<double>(n));
}

}  // namespace pstrain
