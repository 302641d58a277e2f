// ShmRingCollective: the Collective (comm/collective/collective.h) among `world` ranks
// of one host, over shared memory instead of TCP. Rank r receives through
// the ShmChannel (comm/collective/shm_channel.h) it creates and sends through the one
// rank r+1 created. Like NCCL's SHM transport, a segment is copied once, by
// its sender, into a slot of the channel; the receiver sums it
// (reduce-scatter) or copies it (all-gather, broadcast) straight from the
// slot into its tensor.
//
// The algorithm, chunking and order of additions are RingCollective's
// (comm/collective/ring_collective.h), so results are bit-identical to it: chunks whose
// sizes differ by at most one element (an empty chunk still sends one empty
// segment), own += received, segments of at most one slot.
//
// Protocol, per operation (every rank calls the same operations in the
// same order; each counts them, and every segment carries that count, the
// kind, the tensor's size, its step and its index, all checked):
//   1. All-reduce: steps 0..2(n-1)-1 as in RingCollective. Rank r sends
//      the segments of step 0 at once; segment k of step s+1 once segment
//      k of step s is received (summed or kept). Segments travel in
//      (step, segment) order, so the receiver expects exactly one next.
//   2. Broadcast: the root sends its segments in order; every other rank
//      keeps segment k and, unless the next rank is the root, sends it on.
//   3. Barrier: an all-reduce of one float.
// Progress: the whole operation runs on the caller's thread. Each turn it
// receives the next segment if one is ready (and, when that segment is the
// next to send on and a slot is free, writes the sum or copy into that slot
// in the same pass), then sends the next one if it may and a slot is free. Only when neither can
// move does it spin a while and then sleep on one futex: on the outbound channel's space if a send
// is waiting for a slot (the next rank then holds full slots, so it is bound to free one), on the
// inbound channel's data otherwise. Why no deadlock: a receive never waits for a send (a segment to
// forward is only queued), so a rank holding segments always drains them; a rank asleep on space
// faces a full, hence busy, successor; a rank asleep on data has all its sends out, so its
// predecessor's receive chain reaches back to a rank that is able to move.
//
// A call returns once this rank's segments are all in the next rank's slots
// and every receive is done: the caller may then reuse the tensor.
//
// Setup: Create() makes the inbound channel; hand inbound_name() and
// inbound_nonce() to rank r-1, which passes them to ConnectNext(); once it
// has, InboundOpened() unlinks the name (the destructor does in any case).
//
// Threads: one operation at a time, on the caller's thread; SetLost() from
// any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/collective/collective.h"
#include "comm/collective/shm_channel.h"

namespace pstrain {

class ShmRingCollective : public Collective {
 public:
  static StatusOr<std::unique_ptr<ShmRingCollective>> Create(
      int rank, int world, const ShmChannel::Geometry& geometry = ShmChannel::Geometry());

  std::string inbound_name() const;
  uint64_t inbound_nonce() const;
  // Opens rank (rank + 1) % world's inbound channel.
  Status ConnectNext(const std::string& name, uint64_t nonce);
  // Rank r-1 has opened the inbound channel: its name can go.
  void InboundOpened();
  // A neighbour is gone: the operation in progress and every later one fail
  // with `why` (which should name it).
  void SetLost(const Status& why);

  int rank() const override { return rank_; }
  int world() const override { return world_; }

 protected:
  Status SumInPlace(float* data, int64_t n) override;
  Status BroadcastInPlace(float* data, int64_t n, int root) override;

 private:
  enum class Kind : uint32_t { kAllReduce = 1, kBroadcast = 2 };
  struct Cursor {
    int step = 0;
    int64_t segment = 0;
  };
  class Op;

  ShmRingCollective(int rank, int world, int spin_polls, std::unique_ptr<ShmChannel> inbound)
      : rank_(rank), world_(world), spin_polls_(spin_polls), inbound_(std::move(inbound)) {}
  Status Run(Kind kind, float* data, int64_t n, int root);
  Status Fail(const Status& why);

  const int rank_, world_;
  const int spin_polls_;                  // before sleeping on a futex
  std::unique_ptr<ShmChannel> inbound_;   // from rank r-1; created here
  std::unique_ptr<ShmChannel> outbound_;  // to rank r+1
  uint64_t ops_ = 0;                      // operations begun
};

}  // namespace pstrain
