// RingAllReduce: the sum of a float tensor over `world` ranks, in place, on
// the libuv transport: reduce-scatter then all-gather around a ring (rank r
// sends to r+1 and receives from r-1). The tensor is cut into `world` chunks
// whose sizes differ by at most one element (some are empty when the tensor
// has fewer elements than ranks). With n ranks, at rank r:
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
// Threads: AllReduce() blocks its caller (never the loop thread); the ring's
// state lives on the loop thread, where the owner routes RingChunk messages
// from rank r-1 (OnChunk) and reports a lost neighbour (OnPeerLost).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>

#include "comm/completion.h"
#include "comm/connection.h"
#include "comm/event_loop.h"

namespace pstrain {

class RingAllReduce {
 public:
  // `next`: the connection to rank (rank + 1) % world, on `loop`.
  RingAllReduce(EventLoop* loop, int rank, int world, Connection::Ptr next);

  // Sums `data` (`n` floats) over every rank. Every rank calls it with the
  // same n, in the same order; one call at a time. An error names the
  // neighbour that was lost.
  Status AllReduce(float* data, int64_t n);

  // Loop thread: a chunk from rank r-1; a neighbour's connection closed.
  void OnChunk(const RingChunk& chunk, Buffer payload);
  void OnPeerLost(const Status& why);

 private:
  void Begin(float* data, int64_t n, Completion<Status> done);
  void Apply(int step, int segment, const Buffer& payload);
  void Send(int step, int segment);
  void Finish(Status status);
  int64_t ChunkBegin(int64_t chunk) const;
  int64_t ChunkSize(int64_t chunk) const;
  int Segments(int64_t chunk) const;
  int SendIndex(int step) const;
  int ReceiveIndex(int step) const;

  EventLoop* loop_;
  const int rank_, world_;
  Connection::Ptr next_;
  // Loop-thread state of the operation in progress.
  uint64_t op_ = 0;  // counts operations; chunks of a later one wait
  float* data_ = nullptr;
  int64_t n_ = 0;
  int64_t remaining_ = 0;  // segments still to receive
  bool active_ = false;
  Completion<Status> done_;
  Status lost_;  // once a neighbour is gone, every later call fails too
  // Segments of a later operation that came before this rank began it.
  std::map<std::tuple<uint64_t, int, int>, Buffer> early_;
};

}  // namespace pstrain
