// LocalRing: a ring of `world` ranks in this process, each with its own event
// loop, wired over 127.0.0.1 (rank r dials rank r+1). For tests and
// `pstrain bench allreduce`; a job's workers wire theirs from the topology.
#pragma once

#include <memory>
#include <vector>

#include "comm/collective/ring_collective.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/listener.h"

namespace pstrain {

class LocalRing {
 public:
  static StatusOr<std::unique_ptr<LocalRing>> Create(int world);
  ~LocalRing();  // stops every loop before the rings go

  RingCollective& rank(int r) { return *rings_[r]; }
  EventLoop& loop(int r) { return *loops_[r]; }
  int world() const { return static_cast<int>(rings_.size()); }

 private:
  explicit LocalRing(int world) : loops_(world), rings_(world) {}
  Status Wire();

  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<std::unique_ptr<RingCollective>> rings_;
};

}  // namespace pstrain
