// Table rows copied ahead of a live change of an elastic job's servers:
// the chief worker's side (the servers': roles/server/table_moves.h).
//
// Before it holds the workers at the change's step, the scheduler asks the
// chief to copy ahead (PreCopyRows, roles/scheduler/elastic.cc). On a thread
// of its own and over connections of its own, while the job trains on, the
// chief copies every row of the tables held in memory that the change will
// move, from the server it is on to the server it goes to, which holds it
// aside; each server it leaves notes the ids pulled or pushed from then on.
// Then it answers. At the change (roles/worker/grow.cc) only the rows
// touched since, new or gone move (RowsPhase::kDelta): the workers wait for
// those, not for the whole share (OSDI'14's pre-copy, then freeze and send
// the delta).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "comm/transport/event_loop.h"
#include "comm/transport/messages.h"
#include "roles/node/cluster_client.h"
#include "src/common/logging.h"
#include "src/common/mutex.h"
#include "src/common/status.h"

namespace pstrain {

class RowsAhead {
 public:
  // `limit`: how long the topology may take to list the servers.
  RowsAhead(EventLoop* loop, ClusterClient* cluster, Logger log, std::chrono::milliseconds limit)
      : loop_(loop), cluster_(cluster), log_(log), limit_(limit) {}
  ~RowsAhead() { Close(); }
  RowsAhead(const RowsAhead&) = delete;
  RowsAhead& operator=(const RowsAhead&) = delete;

  // On the loop: copies ahead for `request`, as `hello` (the chief's), and
  // calls `answer` on the loop once done. One copy at a time: another
  // request meanwhile is refused.
  void Start(const PreCopyRows& request, const Hello& hello, std::function<void(Status)> answer);
  // At the change from `from` servers to `to` with `slots`: whether the
  // rows were copied ahead for exactly that change. Once: the copy is
  // forgotten either way.
  bool TakeCopied(int from, int to, const std::vector<int>& slots);
  // Waits for a copy under way; any Start after is refused.
  void Close();

 private:
  Status Copy(const PreCopyRows& request, const Hello& hello);

  EventLoop* const loop_;
  ClusterClient* const cluster_;
  Logger log_;
  const std::chrono::milliseconds limit_;
  Mutex mutex_;
  bool running_ GUARDED_BY(mutex_) = false;
  bool closed_ GUARDED_BY(mutex_) = false;
  std::optional<PreCopyRows> copied_ GUARDED_BY(mutex_);
  std::thread thread_ GUARDED_BY(mutex_);
};

}  // namespace pstrain
