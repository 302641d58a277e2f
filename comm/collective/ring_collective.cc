#include "comm/collective/ring_collective.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace pstrain {

namespace {
constexpr int64_t kSegmentFloats = 128 * 1024;  // 512 KiB
constexpr uint64_t kMaxOpsAhead = 16;
// Scratch buffers kept for reuse: enough for every segment of a 64 MiB
// tensor's chunk at world 2 arriving early (a neighbour one operation ahead).
constexpr size_t kScratchBuffers = 128;
constexpr size_t kScratchBytes = kScratchBuffers * kSegmentFloats * sizeof(float);

int64_t SegmentsOf(int64_t elements) {
  return std::max<int64_t>(1, (elements + kSegmentFloats - 1) / kSegmentFloats);
}

int64_t SegmentSize(int64_t elements, int segment) {
  return std::clamp<int64_t>(elements - segment * kSegmentFloats, 0, kSegmentFloats);
}
}  // namespace

RingCollective::RingCollective(EventLoop* loop, int rank, int world, Connection::Ptr next)
    : loop_(loop),
      rank_(rank),
      world_(world),
      next_(std::move(next)),
      scratch_(BufferPool::Create(kScratchBytes, kScratchBuffers)),
      alive_(std::make_shared<RingCollective*>(this)) {}

RingCollective::~RingCollective() { alive_.reset(); }

int64_t RingCollective::ChunkBegin(int64_t chunk) const {
  const int64_t base = n_ / world_, extra = n_ % world_;
  return chunk * base + std::min(chunk, extra);
}

int64_t RingCollective::ChunkSize(int64_t chunk) const {
  return n_ / world_ + (chunk < n_ % world_ ? 1 : 0);
}

// Steps 0..n-2 reduce-scatter, n-1..2n-3 all-gather (see the header).
int RingCollective::SendIndex(int step) const {
  const int s = step < world_ - 1 ? step : step - (world_ - 1);
  const int offset = step < world_ - 1 ? -s : 1 - s;
  return ((rank_ + offset) % world_ + world_) % world_;
}

int RingCollective::ReceiveIndex(int step) const {
  const int s = step < world_ - 1 ? step : step - (world_ - 1);
  const int offset = step < world_ - 1 ? -s - 1 : -s;
  return ((rank_ + offset) % world_ + world_) % world_;
}

Status RingCollective::SumInPlace(float* data, int64_t n) {
  return Run(Kind::kAllReduce, data, n, 0);
}

Status RingCollective::BroadcastInPlace(float* data, int64_t n, int root) {
  return Run(Kind::kBroadcast, data, n, root);
}

Status RingCollective::Run(Kind kind, float* data, int64_t n, int root) {
  Completion<Status> done;
  if (!loop_->Post([=] { Begin(kind, data, n, root, done); }))
    return Aborted("collective: the worker is stopping");
  return done.Wait();
}

void RingCollective::Begin(Kind kind, float* data, int64_t n, int root, Completion<Status> done) {
  if (!lost_.ok()) return done.Set(lost_);
  ++op_;
  kind_ = kind;
  root_ = root;
  data_ = data;
  n_ = n;
  active_ = true;
  done_ = done;
  receives_left_ = 0;
  sends_in_flight_ = 0;
  if (kind == Kind::kAllReduce) {
    for (int step = 0; step < 2 * (world_ - 1); ++step)
      receives_left_ += SegmentsOf(ChunkSize(ReceiveIndex(step)));
    for (int k = 0; k < SegmentsOf(ChunkSize(SendIndex(0))); ++k) SendAllReduce(0, k);
  } else if (rank_ == root) {
    for (int k = 0; k < SegmentsOf(n); ++k)
      Send(0, k, data + k * kSegmentFloats, SegmentSize(n, k));
  } else {
    receives_left_ = SegmentsOf(n);
  }
  // Segments that came before this rank began.
  for (auto it = early_.begin(); it != early_.end() && active_;) {
    if (std::get<0>(it->first) != op_) {
      ++it;
      continue;
    }
    Apply(std::get<1>(it->first), std::get<2>(it->first), it->second);
    it = early_.erase(it);
  }
  MaybeFinish();
}

// Sends `size` floats at `from`, straight from the tensor's memory; the
// payload's keepalive is released once the bytes are written out (or
// dropped with the connection), which counts the send as done.
void RingCollective::Send(int step, int segment, const float* from, int64_t size) {
  ++sends_in_flight_;
  std::weak_ptr<RingCollective*> alive = alive_;
  const uint64_t op = op_;
  std::shared_ptr<const void> sent(nullptr, [alive, op](const void*) {
    if (auto self = alive.lock()) (*self)->OnSent(op);
  });
  next_->Notify(RingChunk{op_, step, segment},
                Payload{reinterpret_cast<const uint8_t*>(from),
                        static_cast<size_t>(size) * sizeof(float), std::move(sent)});
}

void RingCollective::SendAllReduce(int step, int segment) {
  const int chunk = SendIndex(step);
  Send(step, segment, data_ + ChunkBegin(chunk) + segment * kSegmentFloats,
       SegmentSize(ChunkSize(chunk), segment));
}

void RingCollective::OnSent(uint64_t op) {
  if (op != op_ || !active_) return;
  --sends_in_flight_;
  MaybeFinish();
}

Status RingCollective::Misfit(int step, int segment, uint64_t bytes) const {
  return InvalidArgument(
      fmt::format("collective: rank {} sent {} bytes as step {} segment {}, which does not fit",
                  (rank_ + world_ - 1) % world_, bytes, step, segment));
}

// The tensor memory a segment of the operation in progress belongs in, if
// this rank keeps it as it comes (all-gather, or broadcast away from the
// root) and it fits; else null (summed, early, or one Apply will refuse).
float* RingCollective::KeptSegment(const RingChunk& chunk, uint64_t bytes) const {
  if (!active_ || chunk.op != op_ || receives_left_ == 0 || !placing_.expired()) return nullptr;
  const int64_t segment = chunk.segment;
  if (kind_ == Kind::kBroadcast) {
    if (rank_ == root_ || chunk.step != 0 || segment < 0 || segment >= SegmentsOf(n_) ||
        bytes != static_cast<uint64_t>(SegmentSize(n_, static_cast<int>(segment))) * sizeof(float))
      return nullptr;
    return data_ + segment * kSegmentFloats;
  }
  if (chunk.step < world_ - 1 || chunk.step >= 2 * (world_ - 1)) return nullptr;
  const int index = ReceiveIndex(chunk.step);
  if (segment < 0 || segment >= SegmentsOf(ChunkSize(index)) ||
      bytes != static_cast<uint64_t>(SegmentSize(ChunkSize(index), static_cast<int>(segment))) *
                   sizeof(float))
    return nullptr;
  return data_ + ChunkBegin(index) + segment * kSegmentFloats;
}

// A segment kept as it comes goes straight into the tensor. No send reads
// that memory then: this rank sent its share of that segment (reduce-scatter)
// before, and the sum could not come back before the share had arrived.
Buffer RingCollective::PlaceChunk(const Connection::Ptr& from, const RingChunk& chunk,
                                  uint64_t bytes) {
  if (float* into = KeptSegment(chunk, bytes)) {
    placing_ = from;
    return Buffer{reinterpret_cast<uint8_t*>(into), bytes, nullptr};
  }
  if (bytes > static_cast<uint64_t>(kSegmentFloats) * sizeof(float)) return Buffer{};
  return scratch_->Get(bytes);
}

void RingCollective::Apply(int step, int segment, const Buffer& payload) {
  if (kind_ == Kind::kAllReduce) {
    ApplyAllReduce(step, segment, payload);
  } else if (step != 0) {
    Finish(Misfit(step, segment, payload.size));
  } else {
    ApplyBroadcast(segment, payload);
  }
  MaybeFinish();
}

// Reduces (reduce-scatter) or keeps (all-gather) one segment, and sends it on
// for the next step.
void RingCollective::ApplyAllReduce(int step, int segment, const Buffer& payload) {
  const int last = 2 * (world_ - 1);
  const int chunk = step >= 0 && step < last ? ReceiveIndex(step) : 0;
  const int64_t size = SegmentSize(ChunkSize(chunk), segment);
  if (step < 0 || step >= last || segment < 0 || segment >= SegmentsOf(ChunkSize(chunk)) ||
      payload.size != static_cast<uint64_t>(size) * sizeof(float))
    return Finish(Misfit(step, segment, payload.size));
  float* into = data_ + ChunkBegin(chunk) + static_cast<int64_t>(segment) * kSegmentFloats;
  const float* from = reinterpret_cast<const float*>(payload.data);
  if (step < world_ - 1) {
    for (int64_t i = 0; i < size; ++i) into[i] += from[i];
  } else if (from != into) {  // else read straight into place (PlaceChunk)
    std::memcpy(into, from, static_cast<size_t>(size) * sizeof(float));
  }
  if (step + 1 < last) SendAllReduce(step + 1, segment);
  --receives_left_;
}

// Keeps one segment of root's tensor and passes it on, unless the next rank
// is the root.
void RingCollective::ApplyBroadcast(int segment, const Buffer& payload) {
  const int64_t size = SegmentSize(n_, segment);
  if (rank_ == root_ || segment < 0 || segment >= SegmentsOf(n_) ||
      payload.size != static_cast<uint64_t>(size) * sizeof(float))
    return Finish(Misfit(0, segment, payload.size));
  float* into = data_ + static_cast<int64_t>(segment) * kSegmentFloats;
  if (payload.data != reinterpret_cast<uint8_t*>(into))
    std::memcpy(into, payload.data, static_cast<size_t>(size) * sizeof(float));
  if ((rank_ + 1) % world_ != root_) Send(0, segment, into, size);
  --receives_left_;
}

void RingCollective::MaybeFinish() {
  if (active_ && receives_left_ == 0 && sends_in_flight_ == 0 && placing_.expired())
    Finish(Status::OK());
}

void RingCollective::Finish(Status status) {
  if (!active_) return;
  // A segment still being read into the tensor must stop before the caller
  // has the tensor back (only a failure can leave one).
  if (auto conn = placing_.lock()) conn->Close(status.ok() ? Aborted("ring stopped") : status);
  placing_.reset();
  active_ = false;
  done_.Set(std::move(status));
}

void RingCollective::OnChunk(const RingChunk& chunk, Buffer payload) {
  placing_.reset();  // the segment placed (if any) is in
  if (active_ && chunk.op == op_) return Apply(chunk.step, chunk.segment, payload);
  if (chunk.op <= op_) return;  // a finished operation's: cannot be, ignore it
  // A rank runs ahead by a broadcast it roots (the only operation that does
  // not wait for the others); a peer far beyond that is broken or hostile,
  // and what it sent must not pile up here.
  if (chunk.op > op_ + kMaxOpsAhead)
    return OnPeerLost(InvalidArgument(
        fmt::format("collective: rank {} sent a segment of operation {} while this rank is at {}",
                    (rank_ + world_ - 1) % world_, chunk.op, op_)));
  early_[{chunk.op, chunk.step, chunk.segment}] = std::move(payload);
}

void RingCollective::OnPeerLost(const Status& why) {
  if (lost_.ok()) lost_ = why;
  early_.clear();
  Finish(why);
}

}  // namespace pstrain
