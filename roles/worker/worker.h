// Worker: joins the job, connects to every server, builds the partition map
// and the KV client from its job's PS tensors, passes the start barrier with
// the rest of the job, runs the job (roles/worker/job.h) and reports Done.
// Without a job it only does the handshake: in-process tests of the
// cluster's wiring; the pstrain binary never starts a worker without a model
// (src/app/main.cc refuses it, exit 2).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "comm/ps/kv_client.h"
#include "roles/node/node.h"
#include "roles/worker/job.h"
#include "roles/worker/ring.h"
#include "roles/worker/rows_ahead.h"
#include "src/common/config/config.h"
#include "src/common/work_thread.h"

namespace pstrain {

class Worker {
 public:
  Worker(NodeOptions options, Logger log, Config config = {},
         std::unique_ptr<WorkerJob> job = nullptr);
  ~Worker();
  // Runs the worker's part of the job; blocks until it is over.
  Status Run();
  // After Run(): the job was paused, and this node must be rebuilt and
  // rolled back (roles/node/recovery.h).
  bool paused() const { return node_.paused(); }
  int rank() { return node_.cluster().rank(); }
  // Across rollbacks (roles/node/recovery.h): before Run(), what the run
  // before this one kept; after it, what this one keeps.
  void Recall(NodeMemory memory) { node_.Recall(std::move(memory)); }
  NodeMemory Kept() { return node_.Kept(); }
  // Before Run(): where the data sets read by earlier runs of this process
  // are kept, and this run's go.
  void KeepDataIn(std::shared_ptr<DataCache> cache) { data_cache_ = std::move(cache); }

 private:
  Status RunOnce();
  // Connects to every server of `topology` and greets it. Blocking.
  Status ConnectServers(const Topology& topology);
  // Connects to `servers` (their ranks index servers_, already that long).
  Status ConnectTo(const std::vector<NodeInfo>& servers);
  // 14. The job's servers change live (roles/worker/grow.h): more, it
  // connects to those of ranks up to `servers` (from the topology, once it
  // lists them); fewer, it closes its connections to the others, and those
  // that stay take the ranks `slots` gives them (WorkerContext::use_servers).
  // The KV client gets the set.
  Status UseServers(int servers, const std::vector<int>& slots);
  // Every worker compares its PS tensors with worker 0's (through the
  // scheduler): with different models, a pull could wait for a partition
  // nobody creates. Blocking; a barrier of the workers.
  Status CheckSameTensors(const std::vector<TensorSpec>& tensors);
  // The scheduler's requests besides the cluster client's: the chief copies
  // table rows ahead of a live change of the servers (rows_ahead.h).
  bool OnSchedulerRequest(const Connection::Ptr& conn, uint64_t id, const MessageBody& body);
  // Dials the live servers of `view` it has no link to; loop thread.
  void ReconnectServers(const ServerView& view);
  Hello MakeHello();
  // How long a topology listing new servers may take to come.
  std::chrono::milliseconds TopologyPatience();

  Config config_;
  std::unique_ptr<WorkerJob> job_;
  Node node_;
  std::vector<Connection::Ptr> servers_;  // by server rank
  std::unique_ptr<KvClient> kv_;
  // Replication (roles/server/replication.h): the client, once made, and
  // the newest ServerView the scheduler sent; loop thread only.
  KvClient* kv_on_loop_ = nullptr;
  std::optional<ServerView> server_view_;
  // Where each server rank's table rows are (replicated servers); loop.
  std::shared_ptr<ServerRoutes> routes_;
  WorkerRing ring_{&node_};  // after node_: goes before it
  std::shared_ptr<DataCache> data_cache_;
  // Joined before the loop stops (~Worker): its copy calls the servers.
  std::unique_ptr<RowsAhead> rows_ahead_;
  // Servers being dialed again (ReconnectServers); loop thread only.
  std::set<int> reconnecting_;
  WorkThread reconnect_thread_;  // last: joined first
};

}  // namespace pstrain
