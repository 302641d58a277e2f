#include "comm/frame.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace pstrain {
namespace {

// Reads of at least this many payload bytes go straight into the payload.
constexpr size_t kDirectReadThreshold = 64 * 1024;
constexpr size_t kStagingBytes = 64 * 1024;

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
      staging_(kStagingBytes) {}

FrameReader::Span FrameReader::NextBuffer() {
  uint64_t remaining = payload_size_ - have_;
  if (stage_ == Stage::kPayload && remaining >= kDirectReadThreshold) {
    last_was_direct_ = true;
    return {current_.payload.data + have_, static_cast<size_t>(remaining)};
  }
  last_was_direct_ = false;
  return {staging_.data(), staging_.size()};
}

Status FrameReader::Consume(size_t n, const std::function<void(Frame&&)>& on_frame) {
  if (last_was_direct_) {
    have_ += n;
    if (have_ == payload_size_) Emit(on_frame);
    return Status::OK();
  }
  const uint8_t* p = staging_.data();
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
        take = static_cast<size_t>(std::min<uint64_t>(n, current_.header.size() - have_));
        std::memcpy(current_.header.data() + have_, p, take);
        have_ += take;
        if (have_ == current_.header.size()) {
          have_ = 0;
          PSTRAIN_RETURN_IF_ERROR(PlacePayload());
          if (payload_size_ == 0) {
            Emit(on_frame);
          } else {
            stage_ = Stage::kPayload;
          }
        }
        break;
      case Stage::kPayload:
        take = static_cast<size_t>(std::min<uint64_t>(n, payload_size_ - have_));
        std::memcpy(current_.payload.data + have_, p, take);
        have_ += take;
        if (have_ == payload_size_) Emit(on_frame);
        break;
    }
    p += take;
    n -= take;
  }
  return Status::OK();
}

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
  current_.header.resize(header_len);
  payload_size_ = payload_len;
  stage_ = Stage::kHeader;
  have_ = 0;
  return Status::OK();
}

Status FrameReader::PlacePayload() {
  if (placer_) {
    auto placed = placer_(current_.header, payload_size_);
    if (!placed.ok()) return placed.status();
    if (placed->data != nullptr) {
      if (placed->size != payload_size_)
        return Internal(
            fmt::format("payload placed in {} bytes, frame has {}", placed->size, payload_size_));
      current_.payload = std::move(*placed);
      return Status::OK();
    }
  }
  if (payload_size_ > 0) current_.payload = pool_->Get(payload_size_);
  return Status::OK();
}

void FrameReader::Emit(const std::function<void(Frame&&)>& on_frame) {
  Frame done = std::move(current_);
  current_ = Frame{};
  stage_ = Stage::kFixed;
  fixed_have_ = 0;
  have_ = 0;
  payload_size_ = 0;
  on_frame(std::move(done));
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
