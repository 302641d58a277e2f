#include "comm/ring_allreduce.h"

#include <fmt/format.h>

#include <cstring>

namespace pstrain {

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

void RingAllReduce::Begin(float* data, int64_t n, Completion<Status> done) {
  if (!lost_.ok()) return done.Set(lost_);
  ++op_;
  data_ = data;
  n_ = n;
  step_ = 0;
  active_ = true;
  done_ = done;
  Send(0);
  Advance();
}

void RingAllReduce::Send(int step) {
  const int chunk = SendIndex(step);
  Payload payload{reinterpret_cast<const uint8_t*>(data_ + ChunkBegin(chunk)),
                  static_cast<size_t>(ChunkSize(chunk)) * sizeof(float), nullptr};
  next_->Notify(RingChunk{op_, step}, std::move(payload));
}

// Applies every chunk already here for the current step, in order.
void RingAllReduce::Advance() {
  const int last = 2 * (world_ - 1);
  while (active_) {
    auto it = early_.find({op_, step_});
    if (it == early_.end()) return;
    Buffer payload = std::move(it->second);
    early_.erase(it);
    const int chunk = ReceiveIndex(step_);
    const int64_t size = ChunkSize(chunk);
    if (payload.size != static_cast<uint64_t>(size) * sizeof(float)) {
      active_ = false;
      return done_.Set(InvalidArgument(
          fmt::format("all-reduce step {}: rank {} sent {} bytes for chunk {} of {} floats", step_,
                      (rank_ + world_ - 1) % world_, payload.size, chunk, size)));
    }
    float* into = data_ + ChunkBegin(chunk);
    const float* from = reinterpret_cast<const float*>(payload.data);
    if (step_ < world_ - 1) {
      for (int64_t i = 0; i < size; ++i) into[i] += from[i];
    } else {
      std::memcpy(into, from, static_cast<size_t>(size) * sizeof(float));
    }
    if (++step_ == last) {
      active_ = false;
      return done_.Set(Status::OK());
    }
    Send(step_);
  }
}

void RingAllReduce::OnChunk(const RingChunk& chunk, Buffer payload) {
  early_[{chunk.op, chunk.step}] = std::move(payload);
  Advance();
}

void RingAllReduce::OnPeerLost(const Status& why) {
  if (lost_.ok()) lost_ = why;
  early_.clear();
  if (active_) {
    active_ = false;
    done_.Set(why);
  }
}

}  // namespace pstrain
