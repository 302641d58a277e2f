// ClusterClient: a server's or worker's side of the scheduler protocol
// (see roles/scheduler.h): join the job, heartbeats, barriers, Done and
// Shutdown.
//
// The public methods block and must be called from the node's own thread,
// never from the loop thread; the protocol itself runs on the loop.
#pragma once

#include <string>

#include "comm/completion.h"
#include "comm/connection.h"
#include "comm/event_loop.h"
#include "comm/timer.h"
#include "src/common/logging.h"
#include "src/common/options.h"

namespace pstrain {

class ClusterClient {
 public:
  ClusterClient(EventLoop* loop, NodeOptions options, Logger log);

  // Connects to the scheduler (retrying until options.cluster.connect_timeout_s
  // has passed), registers this node as listening on `listen_port`, and waits
  // for the topology. The error names the scheduler address tried.
  StatusOr<Topology> Join(uint16_t listen_port);
  // Waits until every node of `group` has entered the barrier.
  Status Barrier(BarrierGroup group);
  // A barrier that also returns the smallest `value` any member gave.
  StatusOr<int64_t> AgreeMin(BarrierGroup group, int64_t value);
  // A barrier that hands every member the bytes one member gives (the
  // others pass ""; with several, the lowest rank's win). How worker 0
  // hands NCCL's unique id to the other workers. At most 4 KiB.
  StatusOr<std::string> ShareFromOne(BarrierGroup group, std::string blob);
  // Tells the scheduler this worker's work is over.
  Status ReportDone();
  // Blocks until the scheduler ends the job; an error if it is lost first.
  Status WaitForShutdown();

  int rank() const { return rank_; }  // valid after Join

 private:
  StatusOr<BarrierReply> EnterBarrier(BarrierRequest request);
  void TryConnect();
  void OnConnected(Connection::Ptr conn);
  void OnRequest(const Connection::Ptr& conn, Incoming&& in);
  void OnSchedulerLost(const Status& reason);
  StatusOr<Incoming> CallScheduler(MessageBody body, const std::string& what);
  std::string SchedulerAddress() const;

  EventLoop* loop_;
  NodeOptions options_;
  Logger log_;
  uint16_t listen_port_ = 0;
  int rank_ = -1;

  // Loop-thread state.
  Connection::Ptr scheduler_;
  Timer retry_timer_{loop_};
  Timer heartbeat_timer_{loop_};
  uint64_t connect_deadline_ms_ = 0;
  Status last_connect_error_;
  bool shutdown_received_ = false;

  Completion<StatusOr<Topology>> joined_;
  Completion<Status> shutdown_;
};

}  // namespace pstrain
