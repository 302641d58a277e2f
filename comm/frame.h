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
#include <functional>
#include <memory>
#include <vector>

#include "comm/buffer.h"
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
class FrameReader {
 public:
  explicit FrameReader(FrameLimits limits = {}, PayloadPlacer placer = nullptr);
  void set_limits(const FrameLimits& limits) { limits_ = limits; }

  struct Span {
    uint8_t* data;
    size_t size;
  };
  // Where the next bytes read from the socket should be written.
  Span NextBuffer();
  // `n` bytes were written into the span last returned by NextBuffer().
  // Calls `on_frame` for each frame completed. A malformed stream returns an
  // error; the reader must not be used after that.
  Status Consume(size_t n, const std::function<void(Frame&&)>& on_frame);

  // Convenience for tests and in-memory use: copies `data` through the
  // NextBuffer()/Consume() path.
  Status Feed(const uint8_t* data, size_t n, const std::function<void(Frame&&)>& on_frame);

 private:
  enum class Stage { kFixed, kHeader, kPayload };
  Status StartFrame();
  Status PlacePayload();
  void Emit(const std::function<void(Frame&&)>& on_frame);

  FrameLimits limits_;
  PayloadPlacer placer_;
  std::shared_ptr<BufferPool> pool_;
  uint64_t payload_size_ = 0;  // of the frame being read
  Stage stage_ = Stage::kFixed;
  uint8_t fixed_[kFixedHeaderBytes];
  size_t fixed_have_ = 0;
  Frame current_;
  uint64_t have_ = 0;             // bytes of the current stage's body already stored
  std::vector<uint8_t> staging_;  // small reads land here and are parsed out
  bool last_was_direct_ = false;
};

}  // namespace pstrain
