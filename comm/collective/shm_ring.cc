#include "comm/collective/shm_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace pstrain {

namespace {
// Polls of both channels before sleeping: a few microseconds when every
// rank can have a core; when ranks outnumber cores (world 4 on 2), a
// spinning rank only delays the one it waits for, so it sleeps sooner.
// Measured with `pstrain bench allreduce` on 2 cores: world 2 gains from
// 100 polls (4 KiB in 2 us), world 4 does best with about 10 and loses
// a tenth to a third of its bandwidth with 400 or more.
int SpinPolls(int world) {
  return world <= static_cast<int>(std::thread::hardware_concurrency()) ? 100 : 10;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// into += from (the order of RingCollective's additions), also written to
// `copy` unless it is null.
void Sum(float* __restrict into, const float* __restrict from, float* __restrict copy,
         int64_t size) {
  if (copy == nullptr) {
    for (int64_t i = 0; i < size; ++i) into[i] += from[i];
  } else {
    for (int64_t i = 0; i < size; ++i) copy[i] = into[i] += from[i];
  }
}
}  // namespace

// One operation's state at this rank: what to send and receive next.
class ShmRingCollective::Op {
 public:
  Op(const ShmRingCollective& ring, Kind kind, float* data, int64_t n, int root, uint64_t seq)
      : ring_(ring),
        kind_(kind),
        data_(data),
        n_(n),
        root_(root),
        seq_(seq),
        world_(ring.world_),
        rank_(ring.rank_),
        segment_floats_(
            static_cast<int64_t>(ring.inbound_->geometry().slot_bytes / sizeof(float))) {
    if (kind == Kind::kAllReduce) {
      send_steps_ = receive_steps_ = 2 * (world_ - 1);
    } else {
      send_steps_ = (rank_ + 1) % world_ == root_ ? 0 : 1;
      receive_steps_ = rank_ == root_ ? 0 : 1;
    }
  }

  Status Run();

 private:
  // Steps 0..n-2 reduce-scatter, n-1..2n-3 all-gather (see
  // ring_collective.h).
  int SendChunk(int step) const {
    const int s = step < world_ - 1 ? step : step - (world_ - 1);
    const int offset = step < world_ - 1 ? -s : 1 - s;
    return ((rank_ + offset) % world_ + world_) % world_;
  }
  int ReceiveChunk(int step) const { return SendChunk(step + 1); }
  int64_t ChunkBegin(int64_t chunk) const {
    return chunk * (n_ / world_) + std::min<int64_t>(chunk, n_ % world_);
  }
  int64_t ChunkSize(int64_t chunk) const { return n_ / world_ + (chunk < n_ % world_ ? 1 : 0); }
  int64_t SegmentsOf(int64_t elements) const {
    return std::max<int64_t>(1, (elements + segment_floats_ - 1) / segment_floats_);
  }
  // Where segment `segment` of a step's chunk lies in the tensor.
  float* SegmentAt(int chunk, int64_t segment, int64_t* size) const {
    const int64_t begin = kind_ == Kind::kAllReduce ? ChunkBegin(chunk) : 0;
    const int64_t elements = kind_ == Kind::kAllReduce ? ChunkSize(chunk) : n_;
    *size = std::clamp<int64_t>(elements - segment * segment_floats_, 0, segment_floats_);
    return data_ + begin + segment * segment_floats_;
  }
  int64_t Segments(int chunk) const {
    return SegmentsOf(kind_ == Kind::kAllReduce ? ChunkSize(chunk) : n_);
  }
  void Advance(Cursor* at, int chunk) const {
    if (++at->segment == Segments(chunk)) {
      ++at->step;
      at->segment = 0;
    }
  }
  // Segment k of step s goes out once segment k of step s-1 (broadcast:
  // of step 0 itself, unless this is the root) has come in.
  bool MaySend() const {
    if (send_.step >= send_steps_) return false;
    const int needed = kind_ == Kind::kAllReduce ? send_.step - 1 : (rank_ == root_ ? -1 : 0);
    if (needed < 0) return true;
    return receive_.step > needed || (receive_.step == needed && receive_.segment > send_.segment);
  }
  StatusOr<bool> TrySend();
  StatusOr<bool> TryReceive();
  StatusOr<float*> ForwardSlot() const;
  void Published(int64_t size);
  Status Misfit(const SegmentHeader& got) const;

  const ShmRingCollective& ring_;
  const Kind kind_;
  float* const data_;
  const int64_t n_;
  const int root_;
  const uint64_t seq_;
  const int world_, rank_;
  const int64_t segment_floats_;
  int send_steps_ = 0, receive_steps_ = 0;
  Cursor send_, receive_;  // the next segment to send, to receive
};

Status ShmRingCollective::Op::Run() {
  int idle = 0;
  while (send_.step < send_steps_ || receive_.step < receive_steps_) {
    auto received = TryReceive();
    if (!received.ok()) return received.status();
    auto sent = TrySend();
    if (!sent.ok()) return sent.status();
    if (*received || *sent) {
      idle = 0;
      continue;
    }
    if (++idle < ring_.spin_polls_) {
      CpuRelax();
      continue;
    }
    idle = 0;
    // A send waits for a slot: the next rank holds full slots and is bound
    // to free one. Otherwise this rank waits for data.
    PSTRAIN_RETURN_IF_ERROR(MaySend() ? ring_.outbound_->WaitForSpace()
                                      : ring_.inbound_->WaitForData());
  }
  return Status::OK();
}

StatusOr<bool> ShmRingCollective::Op::TrySend() {
  if (!MaySend()) return false;
  auto slot = ring_.outbound_->FreeSlot();
  if (!slot.ok()) return slot.status();
  if (*slot == nullptr) return false;
  int64_t size = 0;
  const float* from = SegmentAt(SendChunk(send_.step), send_.segment, &size);
  std::memcpy(*slot, from, static_cast<size_t>(size) * sizeof(float));
  Published(size);
  return true;
}

void ShmRingCollective::Op::Published(int64_t size) {
  ring_.outbound_->Publish(SegmentHeader{seq_, static_cast<uint32_t>(kind_), send_.step, n_,
                                         send_.segment,
                                         static_cast<uint64_t>(size) * sizeof(float)});
  Advance(&send_, SendChunk(send_.step));
}

// When the segment just received is the next to send on and a slot is
// free, it is written to that slot in the same pass: the tensor's segment
// is not read a second time.
StatusOr<float*> ShmRingCollective::Op::ForwardSlot() const {
  const int step = kind_ == Kind::kAllReduce ? receive_.step + 1 : 0;
  if (send_.step >= send_steps_ || send_.step != step || send_.segment != receive_.segment)
    return static_cast<float*>(nullptr);
  auto slot = ring_.outbound_->FreeSlot();
  if (!slot.ok()) return slot.status();
  return reinterpret_cast<float*>(*slot);
}

StatusOr<bool> ShmRingCollective::Op::TryReceive() {
  if (receive_.step >= receive_steps_) return false;
  SegmentHeader got;
  const uint8_t* payload = nullptr;
  auto ready = ring_.inbound_->Peek(&got, &payload);
  if (!ready.ok() || !*ready) return ready;
  const int chunk = ReceiveChunk(receive_.step);
  int64_t size = 0;
  float* into = SegmentAt(chunk, receive_.segment, &size);
  if (got.op != seq_ || got.kind != static_cast<uint32_t>(kind_) || got.n != n_ ||
      got.step != receive_.step || got.segment != receive_.segment ||
      got.bytes != static_cast<uint64_t>(size) * sizeof(float))
    return Misfit(got);
  auto forward = ForwardSlot();
  if (!forward.ok()) return forward.status();
  const float* from = reinterpret_cast<const float*>(payload);
  if (kind_ == Kind::kAllReduce && receive_.step < world_ - 1) {
    Sum(into, from, *forward, size);
  } else {
    std::memcpy(into, from, got.bytes);
    if (*forward) std::memcpy(*forward, into, got.bytes);
  }
  ring_.inbound_->Release();
  Advance(&receive_, chunk);
  if (*forward) Published(size);
  return true;
}

Status ShmRingCollective::Op::Misfit(const SegmentHeader& got) const {
  return InvalidArgument(fmt::format(
      "shm ring: rank {} sent operation {} kind {} of {} floats, step {} segment {}, {} bytes; "
      "rank {} expected operation {} kind {} of {} floats, step {} segment {}",
      (rank_ + world_ - 1) % world_, got.op, got.kind, got.n, got.step, got.segment, got.bytes,
      rank_, seq_, static_cast<uint32_t>(kind_), n_, receive_.step, receive_.segment));
}

StatusOr<std::unique_ptr<ShmRingCollective>> ShmRingCollective::Create(
    int rank, int world, const ShmChannel::Geometry& geometry) {
  if (world < 1 || rank < 0 || rank >= world)
    return InvalidArgument(fmt::format("shm ring: rank {} of {}", rank, world));
  std::unique_ptr<ShmChannel> inbound;
  if (world > 1) {
    auto channel = ShmChannel::Create(geometry);
    if (!channel.ok()) return channel.status().WithContext(fmt::format("shm ring rank {}", rank));
    inbound = std::move(*channel);
  }
  return std::unique_ptr<ShmRingCollective>(
      new ShmRingCollective(rank, world, SpinPolls(world), std::move(inbound)));
}

std::string ShmRingCollective::inbound_name() const {
  return inbound_ ? inbound_->name() : std::string();
}

uint64_t ShmRingCollective::inbound_nonce() const { return inbound_ ? inbound_->nonce() : 0; }

Status ShmRingCollective::ConnectNext(const std::string& name, uint64_t nonce) {
  if (world_ == 1) return Status::OK();
  auto channel = ShmChannel::Open(name, nonce);
  if (!channel.ok())
    return channel.status().WithContext(
        fmt::format("shm ring rank {} to rank {}", rank_, (rank_ + 1) % world_));
  if ((*channel)->geometry().slot_bytes != inbound_->geometry().slot_bytes)
    return InvalidArgument(fmt::format(
        "shm ring rank {}: rank {} uses slots of {} bytes, not {}", rank_, (rank_ + 1) % world_,
        (*channel)->geometry().slot_bytes, inbound_->geometry().slot_bytes));
  outbound_ = std::move(*channel);
  return Status::OK();
}

void ShmRingCollective::InboundOpened() {
  if (inbound_) inbound_->Unlink();
}

void ShmRingCollective::SetLost(const Status& why) {
  if (inbound_) inbound_->SetLost(why);
  if (outbound_) outbound_->SetLost(why);
}

Status ShmRingCollective::Fail(const Status& why) {
  SetLost(why);
  return inbound_->lost();  // the first error wins
}

Status ShmRingCollective::SumInPlace(float* data, int64_t n) {
  return Run(Kind::kAllReduce, data, n, 0);
}

Status ShmRingCollective::BroadcastInPlace(float* data, int64_t n, int root) {
  return Run(Kind::kBroadcast, data, n, root);
}

Status ShmRingCollective::Run(Kind kind, float* data, int64_t n, int root) {
  if (!outbound_) return FailedPrecondition("shm ring: ConnectNext() was not called");
  PSTRAIN_RETURN_IF_ERROR(inbound_->lost());
  Status st = Op(*this, kind, data, n, root, ++ops_).Run();
  if (st.ok()) return st;
  if (inbound_->lost().ok())  // the channel's own error, not SetLost's
    st = st.WithContext(fmt::format("shm ring rank {} (from rank {}, to rank {})", rank_,
                                    (rank_ + world_ - 1) % world_, (rank_ + 1) % world_));
  return Fail(st);
}

}  // namespace pstrain
