// The scheduler's live view: a snapshot of the job (JobView), taken on the
// scheduler's loop thread, and the two ways it is served over HTTP
// (roles/scheduler/http.cc): GET /status as JSON, GET /metrics in the
// Prometheus text exposition format (version 0.0.4). Pure functions of the
// snapshot, so tests render views they build by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/config/options.h"

namespace pstrain {

// One rank of one role, as the scheduler sees it.
struct NodeView {
  Role role = Role::kWorker;
  int rank = 0;
  std::string node_id;  // empty: the rank was never held
  std::string host;
  uint16_t port = 0;
  // "unregistered", "registered" (waiting for the others), "running",
  // "done" (a worker that finished), "lost", "rejoining" (a rollback or a
  // restarted scheduler: not yet back in this generation), "shut down".
  std::string state;
  double heartbeat_age_s = -1;  // -1: never heard from
  int64_t step = -1;            // workers: steps done; -1: none reported yet
  double samples_per_s = 0;     // workers: training rate this epoch
  // A worker that measured the validation set (the chief): its last
  // measure, the epoch it ended and the metric's name; -1: none.
  double validation = -1;
  int validation_epoch = 0;
  std::string validation_metric;
};

struct JobView {
  int servers = 0;
  int workers = 0;
  int64_t generation = 0;  // rollbacks so far
  // "registering", "running", "paused", "stopping", "shutting down", "over".
  std::string phase;
  double uptime_s = 0;
  std::vector<NodeView> nodes;  // servers by rank, then workers by rank
  // An elastic job (train.elastic): its bounds ("workers [1, 4], servers
  // [2, 3]"; empty: a fixed shape), the nodes waiting to join or leave at
  // the next change, and the changes so far, each as the scheduler logged it.
  std::string elastic;
  int joining = 0;
  int leaving = 0;
  std::vector<std::string> shape_changes;
  // A job with replicated servers (train.replication): the server view in
  // force, and for each server rank's rows and partitions the server
  // holding them (its primary), the servers holding their copies, and
  // whether those hold all the primary holds as of this view (false while
  // the primary sends them its state after a change of servers).
  struct Shard {
    int rank = 0;
    int primary = 0;
    std::vector<int> backups;
    bool backups_hold_all = false;
  };
  int replicas = 0;  // 0: not replicated
  int64_t server_view = 0;
  std::vector<Shard> shards;
};

// GET /status: {"job": {...}, "nodes": [...], "totals": {...}}.
std::string StatusJson(const JobView& view);
// GET /metrics: HELP and TYPE lines, then `pstrain_*` samples.
std::string MetricsText(const JobView& view);

}  // namespace pstrain
