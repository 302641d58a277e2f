// StallWatch: tells a periodic heartbeat check that came late, because its
// own process was stopped (SIGSTOP), its machine paused or its CPU starved.
//
// Heartbeats come every interval and a peer counts as silent after the
// timeout, which is at least two intervals. A check that comes late by d
// finds every peer's last heartbeat at least d old, whatever the peer did:
// the loop stalled and has not read what came meanwhile. A healthy peer,
// heard at most one interval before the stall, looks silent once d passes
// the timeout less one interval, which is at least half the timeout; from
// half the timeout on, then, silence is no evidence and every peer gets a
// fresh timeout. Shorter stalls are judged as usual, so a process that is
// merely slow still finds peers that are really gone. The scheduler
// (roles/scheduler/failure.cc) and every node (roles/node/cluster_client.cc)
// watch their own checks this way. Loop thread only.
#pragma once

#include <cstdint>

namespace pstrain {

class StallWatch {
 public:
  // At each check, at `now`: how late it came, in ms, when that is more than
  // half `timeout_ms` (a stall), else 0. The first check is never late.
  uint64_t Check(uint64_t now, uint64_t interval_ms, uint64_t timeout_ms) {
    const uint64_t late =
        Overdue(now, interval_ms, timeout_ms) ? now - last_check_ms_ - interval_ms : 0;
    last_check_ms_ = now;
    return late;
  }
  // Whether, at `now`, the check due after the last one is late by more
  // than half `timeout_ms`: as Check would say, before the check has run.
  bool Overdue(uint64_t now, uint64_t interval_ms, uint64_t timeout_ms) const {
    return last_check_ms_ != 0 && now > last_check_ms_ + interval_ms + timeout_ms / 2;
  }

 private:
  uint64_t last_check_ms_ = 0;
};

}  // namespace pstrain
