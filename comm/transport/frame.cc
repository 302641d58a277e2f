#include "comm/transport/frame.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "src/common/tensor_memory.h"

namespace pstrain {
namespace {

// Reads of at least this many payload bytes go straight into the payload.
constexpr size_t kDirectReadThreshold = 64 * 1024;
// The staging buffer starts small (thousands of idle connections cost little)
// and doubles up to the cap while reads fill it.
constexpr size_t kStagingMin = 4 * 1024;
constexpr size_t kStagingMax = 64 * 1024;
// First allocation for a header or a payload whose bytes began to arrive.
constexpr size_t kFirstHeaderChunk = 256;
constexpr uint64_t kFirstPayloadChunk = 16 * 1024;
// Growth factor of a payload's memory: 4 rather than 2 copies a third of the
// payload instead of all of it (first frame of a size only), measured 1.5-2x
// faster, at the price of holding at most 4x the bytes that arrived.
constexpr uint64_t kPayloadGrowth = 4;

void PutLe(uint64_t v, int bytes, uint8_t* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetLe(const uint8_t* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{in[i]} << (8 * i);
  return v;
}

}  // namespace

void EncodeFixedHeader(uint32_t header_len, uint64_t payload_len, uint8_t* out) {
  PutLe(kFrameMagic, 4, out);
  PutLe(kWireVersion, 2, out + 4);
  PutLe(0, 2, out + 6);
  PutLe(header_len, 4, out + 8);
  PutLe(payload_len, 8, out + 12);
}

FrameReader::FrameReader(FrameLimits limits, PayloadPlacer placer)
    : limits_(limits),
      placer_(std::move(placer)),
      pool_(BufferPool::Create()),
      staging_wanted_(kStagingMin) {}

void FrameReader::TensorDeleter::operator()(uint8_t* p) const { FreeTensorMemory(p, bytes); }

Status FrameReader::OutOfMemory(const std::exception& e) const {
  return InvalidArgument(
      fmt::format("no memory for a frame of {} header and {} payload bytes ({} in so far): {}",
                  header_size_, payload_size_, current_.header.size() + have_, e.what()));
}

FrameReader::Span FrameReader::NextBuffer() {
  last_was_direct_ = false;
  if (!error_.ok()) return {scratch_, sizeof(scratch_)};
  if (stage_ == Stage::kPayload && payload_size_ - have_ >= kDirectReadThreshold) {
    // The socket is readable, so bytes are arriving: room for about as many
    // again as are in, no more.
    if (payload_capacity_ == have_) error_ = GrowPayload(have_ + 1);
    if (!error_.ok()) return {scratch_, sizeof(scratch_)};
    last_was_direct_ = true;
    return {payload_data_ + have_, static_cast<size_t>(payload_capacity_ - have_)};
  }
  if (staging_size_ < staging_wanted_) error_ = GrowStaging();
  if (!error_.ok()) return {scratch_, sizeof(scratch_)};
  return {staging_.get(), staging_size_};
}

Status FrameReader::Consume(size_t n, const std::function<void(Frame&&)>& on_frame) {
  if (!error_.ok()) return error_;
  if (last_was_direct_) {
    have_ += n;
    if (have_ == payload_size_) return Emit(on_frame);
    return Status::OK();
  }
  // A read that filled the staging buffer suggests more are waiting.
  const bool filled = n == staging_size_;
  if (filled && staging_size_ < kStagingMax) staging_wanted_ = 2 * staging_size_;
  PSTRAIN_RETURN_IF_ERROR(ParseStaged(n, on_frame));
  // One that did not drained the socket: until its next read, an idle
  // connection holds no buffer (a scheduler has one connection per node).
  if (!filled) {
    staging_.reset();
    staging_size_ = 0;
  }
  return Status::OK();
}

Status FrameReader::ParseStaged(size_t n, const std::function<void(Frame&&)>& on_frame) {
  const uint8_t* p = staging_.get();
  while (n > 0) {
    size_t take = 0;
    switch (stage_) {
      case Stage::kFixed:
        take = std::min(n, kFixedHeaderBytes - fixed_have_);
        std::memcpy(fixed_ + fixed_have_, p, take);
        fixed_have_ += take;
        if (fixed_have_ == kFixedHeaderBytes) PSTRAIN_RETURN_IF_ERROR(StartFrame());
        break;
      case Stage::kHeader:
        take = std::min<size_t>(n, header_size_ - current_.header.size());
        PSTRAIN_RETURN_IF_ERROR(AppendHeader(p, take));
        if (current_.header.size() == header_size_) {
          PSTRAIN_RETURN_IF_ERROR(PlacePayload());
          if (payload_size_ == 0) {
            PSTRAIN_RETURN_IF_ERROR(Emit(on_frame));
          } else {
            stage_ = Stage::kPayload;
          }
        }
        break;
      case Stage::kPayload:
        take = static_cast<size_t>(std::min<uint64_t>(n, payload_size_ - have_));
        if (payload_capacity_ - have_ < take) PSTRAIN_RETURN_IF_ERROR(GrowPayload(have_ + take));
        std::memcpy(payload_data_ + have_, p, take);
        have_ += take;
        if (have_ == payload_size_) PSTRAIN_RETURN_IF_ERROR(Emit(on_frame));
        break;
    }
    p += take;
    n -= take;
  }
  return Status::OK();
}

// Checks only: the frame takes no memory until its bytes arrive.
Status FrameReader::StartFrame() {
  uint64_t magic = GetLe(fixed_, 4), version = GetLe(fixed_ + 4, 2), flags = GetLe(fixed_ + 6, 2);
  uint64_t header_len = GetLe(fixed_ + 8, 4), payload_len = GetLe(fixed_ + 12, 8);
  if (magic != kFrameMagic)
    return InvalidArgument(fmt::format("bad frame magic 0x{:08x} (not a pstrain peer?)", magic));
  if (version != kWireVersion)
    return InvalidArgument(fmt::format("wire version {} is not supported (this build speaks {})",
                                       version, kWireVersion));
  if (flags != 0) return InvalidArgument(fmt::format("unknown frame flags 0x{:04x}", flags));
  if (header_len == 0 || header_len > limits_.max_header_bytes)
    return InvalidArgument(fmt::format("frame header of {} bytes is outside 1..{}", header_len,
                                       limits_.max_header_bytes));
  if (payload_len > limits_.max_payload_bytes)
    return InvalidArgument(fmt::format("frame payload of {} bytes exceeds the limit of {}",
                                       payload_len, limits_.max_payload_bytes));
  current_ = Frame{};
  header_size_ = static_cast<uint32_t>(header_len);
  payload_size_ = payload_len;
  stage_ = Stage::kHeader;
  return Status::OK();
}

Status FrameReader::AppendHeader(const uint8_t* p, size_t take) {
  std::vector<uint8_t>& header = current_.header;
  try {
    if (header.capacity() - header.size() < take)
      header.reserve(std::min<size_t>(
          header_size_,
          std::max({header.size() + take, 2 * header.capacity(), kFirstHeaderChunk})));
    header.insert(header.end(), p, p + take);
  } catch (const std::exception& e) {  // bad_alloc, length_error
    return OutOfMemory(e);
  }
  return Status::OK();
}

Status FrameReader::PlacePayload() {
  have_ = 0;
  payload_data_ = nullptr;
  payload_capacity_ = 0;
  placed_ = false;
  try {
    if (placer_) {
      auto placed = placer_(current_.header, payload_size_);
      if (!placed.ok()) return placed.status();
      if (placed->data != nullptr) {
        if (placed->size != payload_size_)
          return Internal(
              fmt::format("payload placed in {} bytes, frame has {}", placed->size, payload_size_));
        current_.payload = std::move(*placed);
        placed_ = true;
      }
    }
    // A size this connection had before: its memory is already ours.
    if (!placed_ && payload_size_ > 0) current_.payload = pool_->GetCached(payload_size_);
  } catch (const std::exception& e) {  // bad_alloc, length_error
    return OutOfMemory(e);
  }
  payload_data_ = current_.payload.data;
  payload_capacity_ = current_.payload.size;
  return Status::OK();
}

// Makes room for `need` payload bytes (a new size: not placed, not pooled),
// growing geometrically, never past the announced size. The copies this
// costs add up to a third of the payload, and only for the first frame of a
// size (later ones reuse the pooled memory whole).
Status FrameReader::GrowPayload(uint64_t need) {
  uint64_t capacity = std::min(
      payload_size_, std::max({need, kPayloadGrowth * payload_capacity_, kFirstPayloadChunk}));
  try {
    TensorBytes bigger(static_cast<uint8_t*>(AllocateTensorMemory(capacity)),
                       TensorDeleter{capacity});
    if (have_ > 0) std::memcpy(bigger.get(), payload_data_, have_);
    grown_ = std::move(bigger);
  } catch (const std::exception& e) {  // bad_alloc
    return OutOfMemory(e);
  }
  payload_data_ = grown_.get();
  payload_capacity_ = capacity;
  return Status::OK();
}

Status FrameReader::GrowStaging() {
  staging_.reset();
  staging_size_ = 0;
  try {
    staging_.reset(new uint8_t[staging_wanted_]);
  } catch (const std::exception& e) {  // bad_alloc
    return OutOfMemory(e);
  }
  staging_size_ = staging_wanted_;
  return Status::OK();
}

Status FrameReader::Emit(const std::function<void(Frame&&)>& on_frame) {
  if (grown_) {
    // Full size now: the payload's memory, and the pool's for later frames
    // of this size.
    try {
      current_.payload = pool_->Adopt(grown_.release(), payload_size_);
    } catch (const std::exception& e) {  // bad_alloc (Adopt gave the memory back)
      return OutOfMemory(e);
    }
  }
  Frame done = std::move(current_);
  current_ = Frame{};
  stage_ = Stage::kFixed;
  fixed_have_ = 0;
  header_size_ = 0;
  payload_size_ = 0;
  payload_data_ = nullptr;
  payload_capacity_ = 0;
  placed_ = false;
  have_ = 0;
  on_frame(std::move(done));
  return Status::OK();
}

uint64_t FrameReader::reserved_bytes() const {
  uint64_t payload = (placed_ || stage_ != Stage::kPayload) ? 0 : payload_capacity_;
  return staging_size_ + current_.header.capacity() + payload;
}

Status FrameReader::Feed(const uint8_t* data, size_t n,
                         const std::function<void(Frame&&)>& on_frame) {
  while (n > 0) {
    Span span = NextBuffer();
    size_t k = std::min(n, span.size);
    std::memcpy(span.data, data, k);
    PSTRAIN_RETURN_IF_ERROR(Consume(k, on_frame));
    data += k;
    n -= k;
  }
  return Status::OK();
}

}  // namespace pstrain
