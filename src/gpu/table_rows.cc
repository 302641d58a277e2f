// TableRows (table_rows.h): which rows a batch uses, and the copies of
// those rows between the host and the device tables.
#include "src/gpu/table_rows.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "src/gpu/kernels.h"
#include "src/nn/layer.h"

namespace pstrain::gpu {

const float* TableRows::Table::host_values() const {
  return pinned ? values.get() : param->value.ptr();
}

float* TableRows::Table::host_grads() { return pinned ? grads.get() : param->grad.ptr(); }

TableRows::Table* TableRows::Find(size_t index) {
  for (auto& t : tables_)
    if (t->index == index) return t.get();
  return nullptr;
}

const TableRows::Table* TableRows::Find(size_t index) const {
  for (const auto& t : tables_)
    if (t->index == index) return t.get();
  return nullptr;
}

void TableRows::Add(size_t index, Param* param, int64_t rows, int64_t dim, float* device_values,
                    float* device_grads) {
  auto t = std::make_unique<Table>();
  t->index = index;
  t->param = param;
  t->rows = rows;
  t->dim = dim;
  t->device_values = device_values;
  t->device_grads = device_grads;
  t->stage = staged_;
  staged_ += rows * dim;
  tables_.push_back(std::move(t));
}

// Once, at the model's build: a whole table may come down (QueueGrads).
Status TableRows::Reserve() {
  if (staged_ == 0) return Status::OK();
  PSTRAIN_RETURN_IF_ERROR(staging_.Reserve(staged_));
  return packed_.Reserve(staged_);
}

StatusOr<GpuModel::PinnedTable> TableRows::Pin(size_t index) {
  Table* t = Find(index);
  if (t == nullptr)
    return InvalidArgument("PinTable: param " + std::to_string(index) +
                           " is not an embedding_bag table");
  if (!t->pinned) {
    const int64_t n = t->rows * t->dim;
    PSTRAIN_RETURN_IF_ERROR(t->values.Reserve(n));
    PSTRAIN_RETURN_IF_ERROR(t->grads.Reserve(n));
    std::memcpy(t->values.get(), t->param->value.ptr(), sizeof(float) * n);
    std::memset(t->grads.get(), 0, sizeof(float) * n);
    t->pinned = true;
  }
  return GpuModel::PinnedTable{t->values.get(), t->grads.get()};
}

Status TableRows::Upload(const int32_t* ids, int64_t count, int64_t range, const int32_t* start,
                         cudaStream_t stream, CopyTimer* copies) {
  used_.clear();
  if (start != nullptr) {
    for (int64_t r = 0; r < range; ++r)
      if (start[r + 1] > start[r]) used_.push_back(static_cast<int32_t>(r));
  } else {
    marks_.assign(static_cast<size_t>(range), 0);
    for (int64_t i = 0; i < count; ++i) marks_[ids[i]] = 1;
    for (int64_t r = 0; r < range; ++r)
      if (marks_[r] != 0) used_.push_back(static_cast<int32_t>(r));
  }
  const int64_t used = static_cast<int64_t>(used_.size());
  contiguous_ = used == range;
  if (!contiguous_) {
    // Grown before anything that reads them is queued: growing frees.
    PSTRAIN_RETURN_IF_ERROR(used_staging_.Reserve(used));
    PSTRAIN_RETURN_IF_ERROR(used_device_.Reserve(used));
    std::memcpy(used_staging_.get(), used_.data(), sizeof(int32_t) * used);
    PSTRAIN_RETURN_IF_ERROR(copies->Copy(used_device_.get(), used_staging_.get(),
                                         sizeof(int32_t) * used, cudaMemcpyHostToDevice, stream));
  }
  for (auto& table : tables_) {
    Table& t = *table;
    const float* host = t.host_values();
    float* stage = staging_.get() + t.stage;
    const int64_t n = used * t.dim;
    if (contiguous_) {
      if (!t.pinned) {
        std::memcpy(stage, host, sizeof(float) * n);
        host = stage;
      }
      PSTRAIN_RETURN_IF_ERROR(
          copies->Copy(t.device_values, host, sizeof(float) * n, cudaMemcpyHostToDevice, stream));
      continue;
    }
    for (int64_t k = 0; k < used; ++k) {
      std::memcpy(stage + k * t.dim, host + static_cast<int64_t>(used_[k]) * t.dim,
                  sizeof(float) * t.dim);
    }
    float* packed = packed_.get() + t.stage;
    PSTRAIN_RETURN_IF_ERROR(
        copies->Copy(packed, stage, sizeof(float) * n, cudaMemcpyHostToDevice, stream));
    PSTRAIN_CUDA(ScatterRows(packed, used_device_.get(), used, t.dim, t.device_values, stream));
  }
  return Status::OK();
}

Status TableRows::QueueGrads(const std::function<bool(size_t)>& whole, cudaStream_t stream,
                             CopyTimer* copies) {
  const int64_t used = static_cast<int64_t>(used_.size());
  for (auto& table : tables_) {
    Table& t = *table;
    t.whole = whole && whole(t.index);
    float* into = t.pinned ? t.grads.get() : staging_.get() + t.stage;
    if (t.whole || contiguous_) {
      const int64_t n = (t.whole ? t.rows : used) * t.dim;
      PSTRAIN_RETURN_IF_ERROR(
          copies->Copy(into, t.device_grads, sizeof(float) * n, cudaMemcpyDeviceToHost, stream));
      continue;
    }
    float* packed = packed_.get() + t.stage;
    PSTRAIN_CUDA(GatherRows(t.device_grads, used_device_.get(), used, t.dim, packed, stream));
    PSTRAIN_RETURN_IF_ERROR(copies->Copy(staging_.get() + t.stage, packed,
                                         sizeof(float) * used * t.dim, cudaMemcpyDeviceToHost,
                                         stream));
  }
  return Status::OK();
}

void TableRows::FinishGrads() {
  const int64_t used = static_cast<int64_t>(used_.size());
  for (auto& table : tables_) {
    Table& t = *table;
    float* grad = t.host_grads();
    const float* stage = staging_.get() + t.stage;
    const int64_t total = t.rows * t.dim;
    if (t.whole || contiguous_) {
      const int64_t n = t.whole ? total : used * t.dim;
      if (!t.pinned) std::memcpy(grad, stage, sizeof(float) * n);
      std::memset(grad + n, 0, sizeof(float) * (total - n));
      continue;
    }
    std::memset(grad, 0, sizeof(float) * total);
    for (int64_t k = 0; k < used; ++k) {
      std::memcpy(grad + static_cast<int64_t>(used_[k]) * t.dim, stage + k * t.dim,
                  sizeof(float) * t.dim);
    }
  }
}

}  // namespace pstrain::gpu
