// WorkerJob: what a worker does once it is part of a job: the training loop,
// a benchmark, or a test's scripted steps. The Worker role wires everything
// (scheduler, servers, the KV client) and then hands over.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "comm/collective/collective.h"
#include "comm/ps/kv_client.h"
#include "comm/ps/partition_map.h"
#include "comm/ps/server_routes.h"
#include "roles/checkpoint/worker_place.h"
#include "roles/node/cluster_client.h"
#include "src/common/checkpoint_file.h"
#include "src/common/config/config.h"
#include "src/common/logging.h"

namespace pstrain {

class RowsAhead;  // roles/worker/rows_ahead.h

class DataCache;  // roles/worker/data_cache.h

struct WorkerContext {
  int rank = 0;
  int workers = 1;
  const Config* config = nullptr;
  ClusterClient* cluster = nullptr;  // barriers
  KvClient* kv = nullptr;            // null when the job has no servers
  Logger log;
  EventLoop* loop = nullptr;             // the worker's loop
  std::vector<Connection::Ptr> servers;  // by server rank; use on `loop` only
  // Replicated servers: where each server rank's table rows are now
  // (comm/ps/server_routes.h), and how long a request waits for a lost
  // server's heir; null without train.replication.
  std::shared_ptr<ServerRoutes> routes;
  std::chrono::milliseconds failover_patience{0};
  Collective* collective = nullptr;  // when the job NeedsCollective()
  std::string log_dir = ".";         // metrics files go here (PSTRAIN_LOG_DIR)
  std::string sample_log;            // PSTRAIN_TEST_SAMPLE_LOG (tests only)
  // The data sets this process read in earlier runs (roles/worker/data_cache.h);
  // null: read them.
  DataCache* data_cache = nullptr;
  // Where training starts: the checkpoint every node agreed on at the start
  // barrier (roles/worker/checkpointing.h, AgreeOnResume); step 0: none.
  CheckpointRef resume{0, "", {}, ""};
  // An elastic job's servers changing live (roles/worker/grow.h): makes the
  // servers of ranks below `servers` this worker's (and kv's), connecting
  // to new ones and closing the connections to those that leave; `slots`
  // (a shrink): for each new rank, the rank its server holds now (empty:
  // ranks below `servers` keep theirs).
  std::function<Status(int servers, const std::vector<int>& slots)> use_servers;
  // The chief's: table rows copied ahead of such a change
  // (roles/worker/rows_ahead.h); null elsewhere.
  RowsAhead* rows_ahead = nullptr;
  // A live change of workers (roles/worker/trainer_workers.cc): drop_ring
  // forgets the ring before the change's barrier; connect_ring then makes
  // the new one (this worker's rank and count as the cluster client has
  // them) and returns its collectives.
  std::function<Status()> drop_ring;
  std::function<StatusOr<Collective*>()> connect_ring;
  // A worker that joined a running job live (ClusterClient::joined_live):
  // the chief's place in the data at the step it joins at; none otherwise.
  std::optional<WorkerPlace> joined_at;
};

class WorkerJob {
 public:
  virtual ~WorkerJob() = default;
  // The PS-managed tensors, the same list on every worker (the partition map
  // is computed from it).
  virtual std::vector<TensorSpec> PsTensors() = 0;
  // Whether the job all-reduces among workers: the Worker then wires the
  // ring (context.collective) before the start barrier.
  virtual bool NeedsCollective() { return false; }
  // Runs after every node has passed the start barrier. Called on the
  // worker's own thread; may block.
  virtual Status Run(WorkerContext& context) = 0;
};

}  // namespace pstrain
