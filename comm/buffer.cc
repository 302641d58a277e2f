#include "comm/buffer.h"

#include "src/common/tensor_memory.h"

namespace pstrain {
namespace {
constexpr size_t kMaxFreeBuffers = 16;
}

std::shared_ptr<BufferPool> BufferPool::Create(size_t max_cached_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes));
}

BufferPool::~BufferPool() {
  for (const Free& f : free_) FreeTensorMemory(f.data, f.size);
}

Buffer BufferPool::Get(uint64_t size) {
  Buffer cached = GetCached(size);
  if (cached.data != nullptr) return cached;
  return Adopt(static_cast<uint8_t*>(AllocateTensorMemory(size)), size);
}

Buffer BufferPool::GetCached(uint64_t size) {
  uint8_t* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].size != size) continue;
      data = free_[i].data;
      cached_bytes_ -= size;
      free_[i] = free_.back();
      free_.pop_back();
      break;
    }
  }
  if (data == nullptr) return Buffer{};
  return Adopt(data, size);
}

Buffer BufferPool::Adopt(uint8_t* data, uint64_t size) {
  std::shared_ptr<BufferPool> pool = shared_from_this();
  // Should the control block not be allocated, the deleter still runs
  // (hands `data` back) before bad_alloc leaves.
  std::shared_ptr<void> owner(
      data, [pool, size](void* p) { pool->Release(static_cast<uint8_t*>(p), size); });
  return Buffer{data, size, std::move(owner)};
}

void BufferPool::Release(uint8_t* data, uint64_t size) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < kMaxFreeBuffers && cached_bytes_ + size <= max_cached_bytes_) {
      free_.push_back({data, size});
      cached_bytes_ += size;
      return;
    }
  }
  FreeTensorMemory(data, size);
}

}  // namespace pstrain
