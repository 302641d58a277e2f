// RingCollective: the CPU backend of Collective (comm/collective/collective.h) among
// `world` ranks on the libuv transport. Rank r sends to r+1 and receives from
// r-1, both over one connection each.
//
// All-reduce is reduce-scatter then all-gather around the ring. The tensor is
// cut into `world` chunks whose sizes differ by at most one element (some are
// empty when the tensor has fewer elements than ranks). With n ranks, at rank
// r:
//   reduce-scatter, step s = 0..n-2: send chunk (r - s) mod n; receive chunk
//       (r - s - 1) mod n from r-1 and add it to ours. Chunk r+1 is then the
//       full sum.
//   all-gather, step s = 0..n-2: send chunk (r + 1 - s) mod n; receive chunk
//       (r - s) mod n and keep it.
// Each rank sends 2(n-1)/n of the tensor and receives as much: the bus
// bandwidth of a ring. Chunks go straight from the tensor's memory, in
// segments of at most kSegmentFloats: a segment received at step s is
// reduced and sent on for step s+1 at once, so sending, receiving and summing
// overlap instead of waiting for whole chunks.
//
// Broadcast sends root's tensor around the ring in segments; each rank keeps
// a segment and forwards it at once, so the hops pipeline. A barrier is an
// all-reduce of one float.
//
// Memory: a segment this rank keeps as it comes (all-gather, broadcast) is
// read from the socket straight into the tensor (PlaceChunk), no copy; one
// to be summed lands in a buffer of the ring's own, reused (the last freed
// first, still in the CPU's caches), so that no segment costs fresh pages.
// A segment being read into the tensor when the operation fails (a
// neighbour lost) closes its connection at once: nothing writes into the
// tensor after the call returned.
//
// A call returns only once this rank's sends have left its memory as well as
// every receive being done: the caller may then overwrite the tensor.
//
// Threads: the blocking calls run on the caller's thread; the ring's state
// lives on the loop thread, where the owner routes RingChunk messages from
// rank r-1 (PlaceChunk from the connection's request placer, then OnChunk)
// and reports a lost neighbour (OnPeerLost).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "comm/collective/collective.h"
#include "comm/transport/completion.h"
#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"

namespace pstrain {

class RingCollective : public Collective {
 public:
  // `next`: the connection to rank (rank + 1) % world, on `loop` (null when
  // world is 1).
  RingCollective(EventLoop* loop, int rank, int world, Connection::Ptr next);
  ~RingCollective() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }

  // Loop thread: where the payload of `chunk` (`bytes`) from rank r-1 on
  // `from` goes, asked once its header is in (Connection::SetRequestPlacer).
  Buffer PlaceChunk(const Connection::Ptr& from, const RingChunk& chunk, uint64_t bytes);
  // Loop thread: a chunk from rank r-1; a neighbour's connection closed.
  void OnChunk(const RingChunk& chunk, Buffer payload);
  void OnPeerLost(const Status& why);

 protected:
  Status SumInPlace(float* data, int64_t n) override;
  Status BroadcastInPlace(float* data, int64_t n, int root) override;

 private:
  enum class Kind { kAllReduce, kBroadcast };
  Status Run(Kind kind, float* data, int64_t n, int root);
  void Begin(Kind kind, float* data, int64_t n, int root, Completion<Status> done);
  void Apply(int step, int segment, const Buffer& payload);
  void ApplyAllReduce(int step, int segment, const Buffer& payload);
  void ApplyBroadcast(int segment, const Buffer& payload);
  void Send(int step, int segment, const float* from, int64_t size);
  void SendAllReduce(int step, int segment);
  void OnSent(uint64_t op);
  void MaybeFinish();
  void Finish(Status status);
  Status Misfit(int step, int segment, uint64_t bytes) const;
  float* KeptSegment(const RingChunk& chunk, uint64_t bytes) const;
  int64_t ChunkBegin(int64_t chunk) const;
  int64_t ChunkSize(int64_t chunk) const;
  int SendIndex(int step) const;
  int ReceiveIndex(int step) const;

  EventLoop* loop_;
  const int rank_, world_;
  Connection::Ptr next_;
  // Loop-thread state of the operation in progress.
  uint64_t op_ = 0;  // counts operations; chunks of a later one wait
  Kind kind_ = Kind::kAllReduce;
  int root_ = 0;
  float* data_ = nullptr;
  int64_t n_ = 0;
  int64_t receives_left_ = 0;    // segments still to receive
  int64_t sends_in_flight_ = 0;  // segments not yet written out
  bool active_ = false;
  Completion<Status> done_;
  Status lost_;  // once a neighbour is gone, every later call fails too
  // Segments of a later operation that came before this rank began it.
  std::map<std::tuple<uint64_t, int, int>, Buffer> early_;
  // The inbound connection while it reads a segment into the tensor.
  std::weak_ptr<Connection> placing_;
  // Where segments to be summed (and early ones) are read to.
  std::shared_ptr<BufferPool> scratch_;
  // Written-out notices may come after this object is gone (a connection
  // outliving the ring); they check this token first.
  std::shared_ptr<RingCollective*> alive_;
};

}  // namespace pstrain
