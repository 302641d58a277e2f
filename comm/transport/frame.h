// Frames: the unit of every exchange on a pstrain connection.
//
//   offset size  field
//   0      4     magic "PSTR" (0x50 0x53 0x54 0x52)
//   4      2     version (kWireVersion)
//   6      2     flags (must be 0)
//   8      4     header_len: bytes of the FlatBuffers header that follows
//   12     8     payload_len: raw payload bytes after the header
// All integers little-endian. A frame whose fixed header is wrong in any way
// is rejected before a byte of its body is read; the connection that sent it
// is closed with the reason, never the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "comm/transport/buffer.h"
#include "src/common/status.h"

namespace pstrain {

inline constexpr uint32_t kFrameMagic = 0x52545350;  // "PSTR" read little-endian
inline constexpr uint16_t kWireVersion = 1;
inline constexpr size_t kFixedHeaderBytes = 20;

struct FrameLimits {
  uint32_t max_header_bytes = 1 << 20;
  uint64_t max_payload_bytes = uint64_t{1} << 31;
};

// Writes the fixed header for a frame into `out` (kFixedHeaderBytes).
void EncodeFixedHeader(uint32_t header_len, uint64_t payload_len, uint8_t* out);

// A received frame: its FlatBuffers header (not yet verified) and payload.
struct Frame {
  std::vector<uint8_t> header;
  Buffer payload;  // size 0 when the frame has none
};

// Called once a frame's header is in, before its payload is read: returns the
// memory the payload_size bytes go to (exactly that size; e.g. the tensor a
// pull reply belongs in), or an empty Buffer to let the reader allocate one.
// An error ends the stream.
using PayloadPlacer =
    std::function<StatusOr<Buffer>(const std::vector<uint8_t>& header, uint64_t payload_size)>;

// Cuts a byte stream into frames. Feed it through NextBuffer()/Consume() from
// a socket's read callbacks: small frames are parsed out of a staging buffer
// (few reads per frame); a large payload is read straight into its final
// memory (no copy). Single-threaded.
//
// Memory follows the bytes, not the announcement: nothing is taken for a
// frame before its fixed header passed the checks, and its header and payload
// buffers then grow geometrically as bytes arrive, never beyond the announced
// size. A peer that announces 2 GiB and sends 20 bytes costs the staging
// buffer (a few KiB) and nothing more. Payload memory this connection used
// before is reused whole from the reader's pool when it fits (at most twice
// the size: the steady state of a training job, no growth, no copy); a payload the placer puts into
// caller memory is read straight into it. An allocation failure is an error
// Status for this stream, never an exception. Everything the reader holds is
// freed with it (the connection closing).
class FrameReader {
 public:
  explicit FrameReader(FrameLimits limits = {}, PayloadPlacer placer = nullptr);
  void set_limits(const FrameLimits& limits) { limits_ = limits; }

  struct Span {
    uint8_t* data;
    size_t size;
  };
  // Where the next bytes read from the socket should be written. Never
  // fails: if memory for it cannot be had, the next Consume() says so.
  Span NextBuffer();
  // `n` bytes were written into the span last returned by NextBuffer().
  // Calls `on_frame` for each frame completed. A malformed stream (or no
  // memory for a frame) returns an error; the reader must not be used after.
  Status Consume(size_t n, const std::function<void(Frame&&)>& on_frame);

  // Convenience for tests and in-memory use: copies `data` through the
  // NextBuffer()/Consume() path.
  Status Feed(const uint8_t* data, size_t n, const std::function<void(Frame&&)>& on_frame);

  // Bytes this reader holds for reading: its staging buffer plus what it
  // allocated so far for the frame in progress (not a placer's memory).
  uint64_t reserved_bytes() const;

 private:
  enum class Stage { kFixed, kHeader, kPayload };
  // Tensor memory of `bytes` (FreeTensorMemory needs the size back).
  struct TensorDeleter {
    uint64_t bytes;
    void operator()(uint8_t* p) const;
  };
  using TensorBytes = std::unique_ptr<uint8_t, TensorDeleter>;

  Status OutOfMemory(const std::exception& e) const;
  // Parses the first `n` bytes of the staging buffer.
  Status ParseStaged(size_t n, const std::function<void(Frame&&)>& on_frame);
  Status StartFrame();
  Status AppendHeader(const uint8_t* p, size_t take);
  Status PlacePayload();
  Status GrowPayload(uint64_t need);
  Status GrowStaging();
  Status Emit(const std::function<void(Frame&&)>& on_frame);

  FrameLimits limits_;
  PayloadPlacer placer_;
  std::shared_ptr<BufferPool> pool_;
  Stage stage_ = Stage::kFixed;
  uint8_t fixed_[kFixedHeaderBytes];
  size_t fixed_have_ = 0;
  uint32_t header_size_ = 0;   // announced, of the frame being read
  uint64_t payload_size_ = 0;  // announced, of the frame being read
  Frame current_;              // header grows as it arrives
  // Where payload bytes go: current_.payload (placed or pooled, full size)
  // or grown_ (growing, not yet full size); payload_capacity_ bytes there.
  uint8_t* payload_data_ = nullptr;
  uint64_t payload_capacity_ = 0;
  TensorBytes grown_;
  bool placed_ = false;  // current_.payload is the placer's (caller memory)
  uint64_t have_ = 0;    // payload bytes stored
  // Small reads land here and are parsed out; allocated for a read, doubled
  // (up to a cap) each time a read fills it, freed after one that does not.
  std::unique_ptr<uint8_t[]> staging_;
  size_t staging_size_ = 0;
  size_t staging_wanted_;
  bool last_was_direct_ = false;
  Status error_;         // from NextBuffer, reported by Consume
  uint8_t scratch_[64];  // where a read goes when NextBuffer failed
};

}  // namespace pstrain
