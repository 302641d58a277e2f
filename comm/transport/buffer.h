// Buffer: bytes received from a peer (a frame's payload) and who keeps them
// alive. Payload: bytes to send, and who keeps them alive until they are
// written. BufferPool: recycles payload buffers of recurring sizes, so that a
// stream of 4 MiB pushes does not fault in fresh pages for every frame.
// Plain types: code that makes or answers messages (the roles) needs these,
// not the transport that carries them (comm/transport/connection.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/common/mutex.h"

namespace pstrain {

struct Buffer {
  uint8_t* data = nullptr;
  uint64_t size = 0;
  // Owns `data` (and returns it to its pool when the last copy goes). Null
  // when the memory belongs to someone else, e.g. a tensor a pull lands in.
  std::shared_ptr<void> owner;
};

// Bytes sent after a frame's header, straight from the caller's memory.
// `keepalive` holds that memory until the write completes.
struct Payload {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> keepalive;
};

// Thread-safe: buffers may be released on any thread. Keep it by shared_ptr;
// buffers it handed out hold it alive.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Keeps at most `max_cached_buffers` free buffers of at most
  // `max_cached_bytes` together.
  static std::shared_ptr<BufferPool> Create(size_t max_cached_bytes = size_t{256} << 20,
                                            size_t max_cached_buffers = 16);
  ~BufferPool();
  // A buffer of exactly `size` bytes (contents undefined).
  Buffer Get(uint64_t size);
  // A cached buffer for `size` bytes (its memory may be up to twice that), or
  // an empty Buffer: takes no new memory (a frame reader growing a payload
  // as it arrives asks first). Of equal fits, the one given back last: its
  // memory is the likeliest to be in the CPU's caches still.
  Buffer GetCached(uint64_t size);
  // Takes `data` (AllocateTensorMemory of `size` bytes) into the pool: the
  // Buffer returned hands it back to the cache when its last copy goes.
  Buffer Adopt(uint8_t* data, uint64_t size);

 private:
  BufferPool(size_t max_cached_bytes, size_t max_cached_buffers)
      : max_cached_bytes_(max_cached_bytes), max_cached_buffers_(max_cached_buffers) {}
  void Release(uint8_t* data, uint64_t size);

  const size_t max_cached_bytes_;
  const size_t max_cached_buffers_;
  Mutex mutex_;
  struct Free {
    uint8_t* data;
    uint64_t size;
  };
  std::vector<Free> free_ GUARDED_BY(mutex_);
  size_t cached_bytes_ GUARDED_BY(mutex_) = 0;
};

}  // namespace pstrain
