// Scheduler: the rendezvous point of a job.
//
// Protocol (messages in comm/wire.fbs), all on the scheduler's loop thread:
//   1. A node connects and sends RegisterRequest (node id, role, advertised
//      host and port, the cluster shape it was started with, the token).
//   2. The scheduler checks the token and the shape, then assigns the next
//      rank of that role (servers and workers each from 0, in order of
//      registration), logs
//        The <role> node id:<id>,node ip: <ip>,node port:<port> assign rank id:<r>
//      and replies RegisterReply. A node id seen before gets its old rank back
//      (a restarted node); a node beyond MS_SERVER_NUM / MS_WORKER_NUM gets an
//      Error reply saying why.
//   3. When every server and worker is in, every node gets the Topology (all
//      nodes with rank, host, port) and the scheduler logs
//        Start the scheduler node is successful!
//      A node that registers again later makes everyone get it anew.
//   4. Nodes send a Heartbeat every interval. A node silent for longer than
//      the timeout is logged with its id, role and rank, and the job is
//      aborted: every node's connection is closed, so each exits non-zero
//      instead of waiting forever for a peer that is gone. (A node restarted
//      with the same MS_NODE_ID within the timeout keeps the job alive.)
//   5. BarrierRequest(group, value): the reply goes to every member of the
//      group once all of them have asked; it carries the smallest value any
//      member sent (workers agree on a step count this way).
//   6. Each worker sends Done when its work is over. When all have, every
//      node gets Shutdown; once each has acknowledged (or gone away, or the
//      heartbeat timeout passed), the job is over.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/completion.h"
#include "comm/connection.h"
#include "comm/event_loop.h"
#include "comm/listener.h"
#include "comm/timer.h"
#include "src/common/logging.h"
#include "src/common/options.h"

namespace pstrain {

class Scheduler {
 public:
  Scheduler(ClusterOptions options, Logger log);
  ~Scheduler();

  // Listens on options.sched_host:sched_port (port 0: any free port) and
  // starts serving. Returns the bound port.
  StatusOr<uint16_t> Start();
  // Blocks until the job is over; OK when every worker finished.
  Status Wait();
  // Ends the job now with `reason`: every node loses its connection and stops
  // with an error. Any thread.
  void Abort(const std::string& reason);

 private:
  struct NodeEntry {
    NodeInfo info;
    std::weak_ptr<Connection> conn;
    uint64_t last_heard_ms = 0;
    bool silent = false;     // logged as silent
    bool done = false;       // worker reported Done
    bool shut_down = false;  // acknowledged Shutdown or gone
  };
  struct BarrierWaiter {
    std::weak_ptr<Connection> conn;
    uint64_t request_id;
    std::string node_id;
    int rank;
    int64_t value;
    std::string blob;
  };

  void OnAccept(Connection::Ptr conn);
  void OnRequest(const Connection::Ptr& conn, Incoming&& in);
  void OnClose(const Connection::Ptr& conn, const Status& reason);
  void HandleRegister(const Connection::Ptr& conn, uint64_t id, const RegisterRequest& req);
  void HandleBarrier(const Connection::Ptr& conn, uint64_t id, NodeEntry& node,
                     const BarrierRequest& request);
  void HandleDone(const Connection::Ptr& conn, uint64_t id, NodeEntry& node);
  Status CheckRegistration(const RegisterRequest& req) const;
  void SendTopology();
  void CheckHeartbeats();
  void BeginShutdown();
  void MaybeFinish();
  void Finish(Status status);
  void AbortOnLoop(const Status& why);

  std::vector<NodeEntry>& NodesOf(Role role) { return role == Role::kServer ? servers_ : workers_; }
  NodeEntry* FindByConnection(const Connection* conn);
  std::string Describe(const NodeEntry& node) const;
  size_t GroupSize(BarrierGroup g) const;
  bool AllRegistered() const;

  ClusterOptions options_;
  Logger log_;
  EventLoop loop_;
  Listener listener_;
  Timer heartbeat_timer_{&loop_};
  Timer shutdown_timer_{&loop_};
  Completion<Status> finished_;

  // Loop-thread state.
  std::vector<NodeEntry> servers_, workers_;                       // index = rank
  std::unordered_map<std::string, std::pair<Role, int>> rank_of_;  // node id -> role, rank
  std::unordered_map<const Connection*, std::string> node_of_;     // registered connections
  std::array<std::vector<BarrierWaiter>, 3> barriers_;             // by BarrierGroup
  bool topology_sent_ = false;
  bool shutting_down_ = false;
};

}  // namespace pstrain
