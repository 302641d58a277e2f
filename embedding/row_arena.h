// RowArena: the rows of a SparseTable, `stride` floats each, in blocks of
// 2 MiB (one huge page, see tensor_memory.h) that are never moved.
//
// Why not one std::vector: growing it copies every row into fresh memory
// and briefly needs twice the table; and pulls read rows in random order,
// so over 4 KiB pages nearly every row cost a TLB miss. Blocks fix both:
// growth allocates one more block, and each block is one huge page.
// The price: a table holds at least one block, 2 MiB, once it has a row.
//
// A block holds as many whole rows as fit in 2 MiB (one row when a row is
// larger); finding a row costs a division, nothing next to the cache miss
// of reading it. Rows are not initialized (the table writes every float of
// a new row).
// Thread-safety: none; the table's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/common/tensor_memory.h"

namespace pstrain {

class RowArena {
 public:
  explicit RowArena(size_t stride)
      : stride_(stride),
        rows_per_block_(std::max<size_t>(1, kBlockBytes / (stride * sizeof(float)))),
        block_bytes_(std::max(kBlockBytes, stride * sizeof(float))) {}
  RowArena(RowArena&&) = default;

  float* Row(uint32_t row) {
    return blocks_[row / rows_per_block_].get() + (row % rows_per_block_) * stride_;
  }
  const float* Row(uint32_t row) const { return const_cast<RowArena*>(this)->Row(row); }

  // Makes rows [0, rows) valid; rows past it are forgotten (their blocks
  // stay for reuse).
  void Resize(size_t rows) {
    while (blocks_.size() * rows_per_block_ < rows) {
      Block block(static_cast<float*>(AllocateTensorMemory(block_bytes_)), Free{block_bytes_});
      blocks_.push_back(std::move(block));
    }
  }

 private:
  static constexpr size_t kBlockBytes = size_t{2} << 20;
  struct Free {
    size_t bytes;
    void operator()(float* p) const { FreeTensorMemory(p, bytes); }
  };
  using Block = std::unique_ptr<float[], Free>;

  size_t stride_;
  size_t rows_per_block_;
  size_t block_bytes_;
  std::vector<Block> blocks_;
};

}  // namespace pstrain
