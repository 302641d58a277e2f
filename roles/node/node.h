// Node: what a server and a worker share. A node owns one event loop, listens
// for peers (workers connect to servers, and to each other for all-reduce),
// and joins the job through the scheduler.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "comm/transport/event_loop.h"
#include "comm/transport/listener.h"
#include "comm/transport/signal_watcher.h"
#include "roles/node/cluster_client.h"
#include "src/common/config/options.h"
#include "src/common/logging.h"

namespace pstrain {

// What a node keeps from one run to the next across a rollback
// (roles/node/recovery.h): the topology it acknowledged last, so that the
// scheduler sends the next run only the peers that changed, and the port it
// listened on, so that its own entry does not change for its peers.
// After a change of an elastic job's shape, also the rank and shape it
// registers with next.
struct NodeMemory {
  std::optional<Topology> topology;
  uint16_t port = 0;  // 0: none
  int rank = -1;      // -1: the one it held
  int server_num = 0;
  int worker_num = 0;  // 0: the shape is unchanged
};

class Node {
 public:
  using RequestHandler = Connection::RequestHandler;
  using CloseHandler = Connection::CloseHandler;

  Node(NodeOptions options, Logger log);
  ~Node();  // stops the loop: every handle closes before members go

  // Starts the loop, listens on options.node_port (peers' requests go to
  // `on_peer_request`, and a peer's closed connection to `on_peer_closed` if
  // set, both on the loop thread) and joins the job.
  StatusOr<Topology> Start(RequestHandler on_peer_request, CloseHandler on_peer_closed = nullptr);
  // Reports Done (workers) and waits for the scheduler to end the job.
  // `at_end`, if set, runs once the job is over, before the loop stops.
  Status Finish(const std::function<void()>& at_end = nullptr);
  // What a run of this node comes to, given what its work returned: the
  // scheduler's verdict (pause, end of the job) outranks the error that
  // interrupted work returns. A lost peer is probably lost to the scheduler
  // too: its verdict is awaited a while before the node blames itself and
  // reports the failure (which ends the job for every node).
  Status Outcome(const Status& run);
  // The peer whose connection from this node failed first in this run (the
  // loop's failed_peers() found in the topology), if any.
  std::optional<NodeInfo> LostPeer();
  // The job was paused: this node must be rebuilt and rolled back.
  bool paused() const { return cluster_.paused(); }
  // Before Start(): what an earlier run of this node kept. Its port is
  // listened on again unless options.node_port names one (or it is taken).
  void Recall(NodeMemory memory);
  // What this run keeps for the next. Any thread.
  NodeMemory Kept();

  // Also runs `hook` (on the loop) when the job's verdict interrupts this
  // node (a pause, the end of the job): for what waits on no connection.
  // Any thread.
  void OnInterrupt(std::function<void(const Status&)> hook);

  EventLoop& loop() { return loop_; }
  ClusterClient& cluster() { return cluster_; }
  const NodeOptions& options() const { return options_; }
  const Logger& log() const { return log_; }

 private:
  std::string BindHost() const;

  NodeOptions options_;
  Logger log_;
  EventLoop loop_;
  Listener listener_;
  ClusterClient cluster_;
  SignalWatcher signals_{&loop_};  // SIGTERM / SIGINT: ask the scheduler to stop the job
  uint16_t recalled_port_ = 0;     // Recall(), before Start()
  std::function<void(const Status&)> on_interrupt_;  // loop thread
  std::atomic<uint16_t> port_{0};                    // listened on, once Start() got that far
};

}  // namespace pstrain
