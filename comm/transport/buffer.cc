#include "comm/transport/buffer.h"

#include "src/common/tensor_memory.h"

namespace pstrain {

std::shared_ptr<BufferPool> BufferPool::Create(size_t max_cached_bytes, size_t max_cached_buffers) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes, max_cached_buffers));
}

BufferPool::~BufferPool() {
  for (const Free& f : free_) FreeTensorMemory(f.data, f.size);
}

Buffer BufferPool::Get(uint64_t size) {
  Buffer cached = GetCached(size);
  if (cached.data != nullptr) return cached;
  return Adopt(static_cast<uint8_t*>(AllocateTensorMemory(size)), size);
}

// The smallest cached buffer that holds `size` bytes without wasting more
// than as many again: payloads whose sizes vary a little from frame to frame
// (a batch's embedding rows) reuse memory too.
Buffer BufferPool::GetCached(uint64_t size) {
  uint8_t* data = nullptr;
  uint64_t capacity = 0;
  {
    MutexLock lock(&mutex_);
    size_t best = free_.size();
    for (size_t i = free_.size(); i-- > 0;) {  // the last given back first
      if (free_[i].size < size || free_[i].size / 2 > size) continue;
      if (best == free_.size() || free_[i].size < free_[best].size) best = i;
    }
    if (best == free_.size()) return Buffer{};
    data = free_[best].data;
    capacity = free_[best].size;
    cached_bytes_ -= capacity;
    free_[best] = free_.back();
    free_.pop_back();
  }
  Buffer buffer = Adopt(data, capacity);
  buffer.size = size;
  return buffer;
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
    MutexLock lock(&mutex_);
    if (free_.size() < max_cached_buffers_ && cached_bytes_ + size <= max_cached_bytes_) {
      free_.push_back({data, size});
      cached_bytes_ += size;
      return;
    }
  }
  FreeTensorMemory(data, size);
}

}  // namespace pstrain
