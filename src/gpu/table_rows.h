// Internal to the CUDA module: the embedding_bag tables among a GpuModel's
// params, which travel between host and device only in the rows a batch's
// ids name (gpu.h). Rows beyond those on the device keep whatever an
// earlier batch left: no forward reads them, and backward zeroes their
// gradient.
//
// The rows in use are the distinct ids of the batch, ascending. When they
// are 0..U-1 (server-held tables: the ids are renumbered so) each table's
// rows go up, and their gradient comes down, as one block; otherwise they
// are packed on the host, copied, and scattered into the table by a kernel
// (and gathered the same way for the gradient).
//
// Host side of a table: its Param's tensors, or after Pin() pinned arrays
// of the same size, copied from and into directly. Param tensors go through
// a pinned staging array instead. Like the model, this belongs to one
// thread; each public call of the model waits for its stream before it
// returns, so staging memory is free again when the next call begins.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "src/common/status.h"
#include "src/gpu/copy_timer.h"
#include "src/gpu/cuda_util.h"
#include "src/gpu/gpu.h"

namespace pstrain {

struct Param;

namespace gpu {

class TableRows {
 public:
  // Param `index` of the model (host `param`) is a [rows, dim] table at
  // `device_values` and `device_grads`. Then, after the last Add: Reserve.
  void Add(size_t index, Param* param, int64_t rows, int64_t dim, float* device_values,
           float* device_grads);
  Status Reserve();
  bool Has(size_t index) const { return Find(index) != nullptr; }

  // GpuModel::PinTable: the table's pinned host arrays, made on the first
  // call with the Param's values (and zero gradients).
  StatusOr<GpuModel::PinnedTable> Pin(size_t index);

  // Forward: the batch's `count` ids (each < range) name its rows; queues
  // their values' copies up. `start`: null, or for each r < range where id
  // r's occurrences begin (DeviceBatch::id_start on the host), which tells
  // the ids in use without another pass.
  Status Upload(const int32_t* ids, int64_t count, int64_t range, const int32_t* start,
                cudaStream_t stream, CopyTimer* copies);
  // Backward: queues the copies down of the last Upload's rows of each
  // gradient; a table whose index `whole` answers true comes down whole.
  Status QueueGrads(const std::function<bool(size_t)>& whole, cudaStream_t stream,
                    CopyTimer* copies);
  // Once the stream was waited for: the host gradients, zero outside those
  // rows, as the CPU layer's.
  void FinishGrads();

 private:
  struct Table {
    size_t index = 0;
    Param* param = nullptr;  // the host's, not owned
    int64_t rows = 0, dim = 0;
    float* device_values = nullptr;  // slices of the model's flat arrays
    float* device_grads = nullptr;
    int64_t stage = 0;  // where its rows lie in staging_ and packed_
    bool pinned = false;
    PinnedArray<float> values, grads;  // Pin's
    bool whole = false;                // the last QueueGrads copied all rows
    const float* host_values() const;
    float* host_grads();
  };
  Table* Find(size_t index);
  const Table* Find(size_t index) const;

  std::vector<std::unique_ptr<Table>> tables_;  // PinnedArray does not move
  int64_t staged_ = 0;                          // floats of all tables
  std::vector<int32_t> used_;                   // the last Upload's rows, ascending
  bool contiguous_ = true;                      // used_ is 0..used_.size() - 1
  std::vector<uint8_t> marks_;                  // Upload's scratch without `start`
  PinnedArray<float> staging_;
  DeviceArray<float> packed_;  // scattered rows, packed, on the device
  PinnedArray<int32_t> used_staging_;
  DeviceArray<int32_t> used_device_;
};

}  // namespace gpu
}  // namespace pstrain
