// SimNodes: many light nodes against one real scheduler, for `pstrain bench
// scheduler`. Each node has its own connection (comm/transport, handshake
// included) and speaks only the node side of the scheduler protocol
// (roles/scheduler/scheduler.h): no listener, no peers, no model. The nodes
// are spread over a few event loops, one thread each.
//
// Phases, each started from the caller's thread and waited on with a deadline:
//   Join():   every node connects (a bounded number of connects in flight),
//             sends RegisterRequest, and answers the Topology with Ack;
//   Beat():   every node sends `heartbeats` Heartbeats, then enters the
//             barrier of all nodes: the last reply comes only once the
//             scheduler has handled every heartbeat sent before it;
//   Recover(): the last worker's connection closes (its process died); each
//             other node answers the Pause, reconnects and registers again
//             with its node id (keeping, as a node rolled back does, the
//             topology it acknowledged), a new node id takes the lost rank,
//             and every node waits for its Topology of the next generation;
//   Finish(): workers report Done; every node answers the Shutdown.
// Throughout, each node sends a Heartbeat every second as a real node does,
// so that the scheduler never counts one lost. A node whose connection closes
// before its Shutdown, or whose job is ended, fails the phase under way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/config/options.h"
#include "src/common/status.h"

namespace pstrain {

struct SimShape {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  int servers = 1;
  int workers = 1;
  int loops = 4;        // threads the nodes are spread over
  int window = 1024;    // connects and registrations in flight, all loops together
  int heartbeats = 10;  // per node in Beat()
  // Node i connects from 127.0.0.(2 + i % local_ips): towards one address,
  // Linux's ephemeral ports run short past about 14,000 connections
  // (connect() takes the odd half of ip_local_port_range first).
  int local_ips = 8;
  double recovery_wait_s = 0;  // as registered: above 0 for Recover()
  ClusterOptions limits;       // the connections' security settings, as a node's
};

// What Join() saw. Seconds count from the start of Join().
struct JoinFigures {
  double registered_s = 0;            // the last RegisterReply
  double topology_s = 0;              // the last Topology
  uint64_t topology_bytes = 0;        // the frames as received, all nodes together
  uint64_t topology_entries = 0;      // NodeInfo entries in them
  uint64_t topology_max_entries = 0;  // in the largest one
  int64_t connect_retries = 0;
};

// What Recover() saw: seconds from the lost connection.
struct RecoveryFigures {
  double topology_s = 0;              // the last Topology of the next generation
  uint64_t topology_bytes = 0;        // those frames as received, all nodes together
  uint64_t topology_entries = 0;      // NodeInfo entries in them
  uint64_t topology_max_entries = 0;  // in the largest one
};

class SimNodes {
 public:
  explicit SimNodes(SimShape shape);
  ~SimNodes();
  SimNodes(const SimNodes&) = delete;
  SimNodes& operator=(const SimNodes&) = delete;

  Status Start();
  StatusOr<JoinFigures> Join(double timeout_s);
  // Seconds until the last barrier reply; Heartbeats sent: nodes x heartbeats.
  StatusOr<double> Beat(double timeout_s);
  StatusOr<RecoveryFigures> Recover(double timeout_s);
  // Seconds until the last Shutdown.
  StatusOr<double> Finish(double timeout_s);
  int nodes() const { return shape_.servers + shape_.workers; }

 private:
  struct Shared;
  struct Shard;
  SimShape shape_;
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace pstrain
