// pstrain_gpu: training on a CUDA device (device 0) and the NCCL all-reduce
// among GPU workers. Always built; where CUDA was not found at build time
// every call returns FailedPrecondition saying so, and GpuBuildEnabled() is
// false.
//
// The CUDA code lives in a module of its own (libpstrain_cuda.so) that this
// API opens on the first call needing a device (CheckGpuVisible,
// GpuDescription, GpuModel::Build, DeviceBuffer::Create, NCCL); until then,
// and in a process that never asks, no CUDA library is loaded.
// GpuBuildEnabled and CheckGpuModelSupported never open it. Where the module
// is looked for: src/gpu/module_loader.h.
//
// Threads: a GpuModel, a NcclCommunicator and a DeviceBuffer each belong to
// one thread (the worker's). Device work is queued on a CUDA stream; the
// calls that hand results to the host wait for it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/common/status.h"

// CUDA's cudaStream_t is `CUstream_st*`: naming the struct keeps CUDA's
// headers out of this one, and the type stays checked.
struct CUstream_st;

namespace pstrain {

struct Batch;        // src/common/batch.h
struct ModelConfig;  // src/common/config/model_config.h
struct Param;        // src/nn/layer.h
struct Tensor;       // src/common/tensor.h
namespace gpu {
class ModelBackend;       // src/gpu/backend.h
class CollectiveBackend;  // src/gpu/backend.h
}  // namespace gpu

using GpuStream = CUstream_st*;  // nullptr: CUDA's default stream

// True when this binary was built with CUDA (its module was built).
bool GpuBuildEnabled();
// OK when a CUDA device is usable; otherwise FailedPrecondition with a
// message that says why ("model.device: gpu, but no GPU is visible (...)" or
// "... built without CUDA ...").
Status CheckGpuVisible();
// Device 0's name, memory and compute capability, for logs.
std::string GpuDescription();
// OK when the GPU path can run `config`: a sequential model, or wide and
// deep towers, of any layer type src/nn has (linear, conv2d, maxpool,
// avgpool, relu, sigmoid, tanh, flatten, dropout, concat, embedding_bag)
// with either loss. Otherwise InvalidArgument naming the first layer it
// cannot run ("model.layers[3] (<type>, line 12): not supported on the
// GPU"), for a type added to src/nn and not yet to src/gpu. Needs no device.
Status CheckGpuModelSupported(const ModelConfig& config);

// Forward and backward of a model (sequential, or wide + deep towers) on
// device 0, in float32.
//
// The host Model (src/nn/model.h) stays the owner of the weights: the
// trainer pulls or updates the host Params, calls UploadWeights(), and after
// Backward() finds the gradients in the host Params' grad tensors (copied
// through pinned staging memory). Conventions (weight layouts, padding,
// maxpool ties, the dropout mask of a given seed) are the CPU layers', so a
// step gives the CPU's gradients up to float rounding.
//
// embedding_bag tables travel only in the rows a batch's ids name: each
// Forward sends those rows up with the ids, and Backward brings back those
// rows of the gradient (the others are zero, as on the CPU). With
// server-held tables (roles/worker/remote_embeddings.h) the ids are
// renumbered 0..U-1, so that is one block of U rows each way; PinTable lets
// the rows pulled from the servers land in pinned memory that is copied
// from directly.
class GpuModel {
 public:
  // `params`: the host model's params() (same order, names and shapes); the
  // pointers must outlive the GpuModel. Their current values are uploaded.
  // `seed`: the host Model's build seed, which keys the dropout masks.
  static StatusOr<std::unique_ptr<GpuModel>> Build(const ModelConfig& config,
                                                   const std::vector<Param*>& params,
                                                   uint64_t seed = 0);
  ~GpuModel();

  // Host values -> device: every param but the embedding_bag tables, whose
  // rows each Forward sends itself (so they may change between Forwards).
  Status UploadWeights();
  // Pinned host memory that stands in for embedding_bag param `index`'s
  // host value and grad tensors from now on, each as large as the Param:
  // callers write the batch's rows into `values` (server-held tables pull
  // them straight there), each Forward copies those rows up from it with no
  // staging copy, and Backward leaves the table's gradient in `grads`. The
  // Param's own tensors are no longer read or written. Valid for the
  // model's life; InvalidArgument for a param that is not such a table.
  struct PinnedTable {
    float* values = nullptr;
    float* grads = nullptr;
  };
  StatusOr<PinnedTable> PinTable(size_t index);
  // Forward on the device; the logits ([N, classes] or [N, 1]) are copied
  // into a host tensor owned by the model, valid until the next Forward.
  StatusOr<const Tensor*> Forward(const Batch& batch, bool training);
  // After Forward(batch, true): the mean loss over the batch, and every host
  // Param's grad set to the gradient of that mean loss.
  StatusOr<float> Backward(const Batch& batch);

  // Called by Backward, when set, for each param i once its gradient is
  // complete on the device and before it is copied to the host: the place
  // to all-reduce gradients in place (NcclCommunicator on stream()). Work it
  // queues on stream() is ordered before the copy; an error ends Backward.
  std::function<Status(size_t index, float* device_grad, int64_t n)> on_device_grads;
  // With on_device_grads: whether it may change param `index`'s gradient
  // (all-reduce it). Such an embedding_bag table's gradient comes back
  // whole, since other ranks' rows are in it. Unset: every param.
  std::function<bool(size_t index)> reduced_on_device;

  // The stream the model's device work runs on.
  GpuStream stream() const;
  // Seconds the device spent so far copying between host and device
  // (weights and batches up, logits, gradients and losses down), timed with
  // CUDA events around each copy; the host's memcpys into the pinned
  // staging array are not in it.
  double CopySeconds() const;
  // Bytes those copies moved so far, both directions.
  int64_t CopiedBytes() const;
  // As Model::SetTrainingForwards: the dropout masks continue from `done`.
  void SetTrainingForwards(uint64_t done);

 private:
  explicit GpuModel(std::unique_ptr<gpu::ModelBackend> backend);
  std::unique_ptr<gpu::ModelBackend> backend_;  // the module's (gpu_model.cc)
};

// Floats in device memory outside a model (tests, benchmarks). Copies are
// synchronous and wait for all work queued on the device before them.
class DeviceBuffer {
 public:
  static StatusOr<std::unique_ptr<DeviceBuffer>> Create(int64_t n);
  ~DeviceBuffer();

  float* data() { return data_; }
  int64_t size() const { return size_; }
  Status CopyFromHost(const std::vector<float>& src);  // src.size() == size()
  StatusOr<std::vector<float>> CopyToHost() const;

 private:
  DeviceBuffer(float* data, int64_t size) : data_(data), size_(size) {}
  float* data_;  // owned: cudaMalloc'd
  int64_t size_;
};

// The NCCL unique id of a new communicator, as bytes to relay to the other
// ranks (the trainer sends it through the scheduler). Rank 0 calls this.
StatusOr<std::string> NcclUniqueIdBytes();

// All-reduce and broadcast among the job's GPU workers, one rank each.
class NcclCommunicator {
 public:
  // Joins the communicator; returns once all `world` ranks have joined.
  // Collectives are queued on `stream` (give the GpuModel's stream()).
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(int rank, int world,
                                                            const std::string& unique_id,
                                                            GpuStream stream = nullptr);
  ~NcclCommunicator();

  // In place on device memory, queued on the stream: later work on the
  // stream sees the result. `average` divides the sum by the world size.
  Status AllReduce(float* device_data, int64_t n, bool average);
  Status Broadcast(float* device_data, int64_t n, int root);
  // Waits until the queued collectives are done.
  Status Synchronize();

 private:
  explicit NcclCommunicator(std::unique_ptr<gpu::CollectiveBackend> backend);
  std::unique_ptr<gpu::CollectiveBackend> backend_;  // the module's (nccl.cc)
};

}  // namespace pstrain
