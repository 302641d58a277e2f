#include "comm/ring_allreduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace pstrain {

namespace {
constexpr int64_t kSegmentFloats = 128 * 1024;  // 512 KiB
}  // namespace

RingAllReduce::RingAllReduce(EventLoop* loop, int rank, int world, Connection::Ptr next)
    : loop_(loop), rank_(rank), world_(world), next_(std::move(next)) {}

int64_t RingAllReduce::ChunkBegin(int64_t chunk) const {
  const int64_t base = n_ / world_, extra = n_ % world_;
  return chunk * base + std::min(chunk, extra);
}

int64_t RingAllReduce::ChunkSize(int64_t chunk) const {
  return n_ / world_ + (chunk < n_ % world_ ? 1 : 0);
}

// Steps 0..n-2 reduce-scatter, n-1..2n-3 all-gather (see the header).
int RingAllReduce::SendIndex(int step) const {
  const int s = step < world_ - 1 ? step : step - (world_ - 1);
  const int offset = step < world_ - 1 ? -s : 1 - s;
  return ((rank_ + offset) % world_ + world_) % world_;
}

int RingAllReduce::ReceiveIndex(int step) const {
  const int s = step < world_ - 1 ? step : step - (world_ - 1);
  const int offset = step < world_ - 1 ? -s - 1 : -s;
  return ((rank_ + offset) % world_ + world_) % world_;
}

Status RingAllReduce::AllReduce(float* data, int64_t n) {
  if (world_ == 1 || n == 0) return Status::OK();
  Completion<Status> done;
  if (!loop_->Post([this, data, n, done] { Begin(data, n, done); }))
    return Aborted("all-reduce: the worker is stopping");
  return done.Wait();
}

int RingAllReduce::Segments(int64_t chunk) const {
  const int64_t size = ChunkSize(chunk);
  return static_cast<int>(std::max<int64_t>(1, (size + kSegmentFloats - 1) / kSegmentFloats));
}

void RingAllReduce::Begin(float* data, int64_t n, Completion<Status> done) {
  if (!lost_.ok()) return done.Set(lost_);
  ++op_;
  data_ = data;
  n_ = n;
  active_ = true;
  done_ = done;
  remaining_ = 0;
  for (int step = 0; step < 2 * (world_ - 1); ++step) remaining_ += Segments(ReceiveIndex(step));
  for (int k = 0; k < Segments(SendIndex(0)); ++k) Send(0, k);
  // Segments that came before this rank began.
  for (auto it = early_.begin(); it != early_.end() && active_;) {
    if (std::get<0>(it->first) != op_) {
      ++it;
      continue;
    }
    Apply(std::get<1>(it->first), std::get<2>(it->first), it->second);
    it = early_.erase(it);
  }
}

void RingAllReduce::Send(int step, int segment) {
  const int chunk = SendIndex(step);
  const int64_t begin = ChunkBegin(chunk) + segment * kSegmentFloats;
  const int64_t size =
      std::min<int64_t>(kSegmentFloats, ChunkSize(chunk) - segment * kSegmentFloats);
  Payload payload{reinterpret_cast<const uint8_t*>(data_ + begin),
                  static_cast<size_t>(std::max<int64_t>(size, 0)) * sizeof(float), nullptr};
  next_->Notify(RingChunk{op_, step, segment}, std::move(payload));
}

// Reduces (reduce-scatter) or keeps (all-gather) one segment, and sends it on
// for the next step.
void RingAllReduce::Apply(int step, int segment, const Buffer& payload) {
  const int last = 2 * (world_ - 1);
  const int chunk = step >= 0 && step < last ? ReceiveIndex(step) : 0;
  const int64_t offset = static_cast<int64_t>(segment) * kSegmentFloats;
  const int64_t size =
      std::max<int64_t>(0, std::min<int64_t>(kSegmentFloats, ChunkSize(chunk) - offset));
  if (step < 0 || step >= last || segment < 0 || segment >= Segments(chunk) ||
      payload.size != static_cast<uint64_t>(size) * sizeof(float))
    return Finish(InvalidArgument(
        fmt::format("all-reduce: rank {} sent {} bytes as step {} segment {}, which does not fit",
                    (rank_ + world_ - 1) % world_, payload.size, step, segment)));
  float* into = data_ + ChunkBegin(chunk) + offset;
  const float* from = reinterpret_cast<const float*>(payload.data);
  if (step < world_ - 1) {
    for (int64_t i = 0; i < size; ++i) into[i] += from[i];
  } else {
    std::memcpy(into, from, static_cast<size_t>(size) * sizeof(float));
  }
  if (step + 1 < last) Send(step + 1, segment);
  if (--remaining_ == 0) Finish(Status::OK());
}

void RingAllReduce::Finish(Status status) {
  if (!active_) return;
  active_ = false;
  done_.Set(std::move(status));
}

void RingAllReduce::OnChunk(const RingChunk& chunk, Buffer payload) {
  if (active_ && chunk.op == op_) return Apply(chunk.step, chunk.segment, payload);
  if (chunk.op > op_) early_[{chunk.op, chunk.step, chunk.segment}] = std::move(payload);
}

void RingAllReduce::OnPeerLost(const Status& why) {
  if (lost_.ok()) lost_ = why;
  early_.clear();
  Finish(why);
}

}  // namespace pstrain
