// RowArena: the rows of a SparseTable, `stride` floats each, in blocks of
// 2 MiB (one huge page, see tensor_memory.h) that are never moved.
//
// Why not one std::vector: growing it copies every row into fresh memory
// and briefly needs twice the table; and pulls read rows in random order,
// so over 4 KiB pages nearly every row cost a TLB miss. Blocks fix both:
// growth allocates one more block, and each block is one huge page.
//
// Rows are not initialized (the table writes every float of a new row).
// Thread-safety: none; the table's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/common/tensor_memory.h"

namespace pstrain {

class RowArena {
 public:
  explicit RowArena(size_t stride) : stride_(stride) {
    constexpr size_t kBlockBytes = size_t{2} << 20;
    while ((size_t{2} << shift_) * stride_ * sizeof(float) <= kBlockBytes) ++shift_;
  }
  RowArena(RowArena&&) = default;

  float* Row(uint32_t row) { return blocks_[row >> shift_].get() + (row & Mask()) * stride_; }
  const float* Row(uint32_t row) const {
    return blocks_[row >> shift_].get() + (row & Mask()) * stride_;
  }

  // Makes rows [0, rows) valid; rows past it are forgotten (their blocks
  // stay for reuse).
  void Resize(size_t rows) {
    while (blocks_.size() << shift_ < rows) {
      const size_t bytes = (size_t{1} << shift_) * stride_ * sizeof(float);
      blocks_.emplace_back(static_cast<float*>(AllocateTensorMemory(bytes)), Free{bytes});
    }
  }

 private:
  struct Free {
    size_t bytes;
    void operator()(float* p) const { FreeTensorMemory(p, bytes); }
  };
  uint32_t Mask() const { return (uint32_t{1} << shift_) - 1; }

  size_t stride_;
  int shift_ = 0;  // a block holds 2^shift rows: the most that fit 2 MiB
  std::vector<std::unique_ptr<float[], Free>> blocks_;
};

}  // namespace pstrain
