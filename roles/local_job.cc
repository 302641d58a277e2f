#include "roles/local_job.h"

#include <fmt/format.h>

#include <mutex>
#include <thread>
#include <vector>

#include "roles/scheduler/scheduler.h"
#include "roles/server/server.h"
#include "roles/worker/worker.h"
#include "src/common/open_files.h"

namespace pstrain {

Status RunLocalJob(const LocalJobOptions& options) {
  ClusterOptions cluster = options.cluster;
  // Every node's connections, both ends of each, in this one process: each
  // worker to each server, to the scheduler and to its ring neighbour.
  const int64_t servers = cluster.server_num, workers = cluster.worker_num;
  PSTRAIN_RETURN_IF_ERROR(CheckOpenFileLimit(
      2 * servers * workers + 2 * (servers + workers) + 2 * workers + kSpareDescriptors,
      fmt::format("a local job of {} servers and {} workers", servers, workers)));
  cluster.sched_host = "127.0.0.1";
  cluster.sched_port = 0;
  Scheduler scheduler(cluster, options.make_logger("scheduler"));
  auto port = scheduler.Start();
  if (!port.ok()) return port.status().WithContext("scheduler");
  cluster.sched_port = *port;

  std::mutex mutex;
  Status first_error;  // GUARDED_BY(mutex)
  auto record = [&](const std::string& who, const Status& st) {
    if (st.ok()) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (first_error.ok()) first_error = st.WithContext(who);
    }
    // The others would wait for this node forever: end the job for all.
    scheduler.Abort(fmt::format("{} failed: {}", who, st.message()));
  };
  std::vector<std::thread> threads;
  // Node i asks for rank i, so its thread's name, its log label and its
  // rank agree (the label is set again, from the rank it got, once it joins).
  auto node_options = [&](Role role, int i) {
    NodeOptions o;
    o.role = role;
    o.cluster = cluster;
    o.node_id = MakeNodeId();
    o.requested_rank = i;
    return o;
  };
  for (int i = 0; i < cluster.server_num; ++i) {
    threads.emplace_back([&, i] {
      std::string name = fmt::format("server {}", i);
      Server server(node_options(Role::kServer, i), options.make_logger(name), options.config);
      record(name, server.Run());
    });
  }
  for (int i = 0; i < cluster.worker_num; ++i) {
    threads.emplace_back([&, i] {
      std::string name = fmt::format("worker {}", i);
      Worker worker(node_options(Role::kWorker, i), options.make_logger(name), options.config,
                    options.make_job ? options.make_job(i) : nullptr);
      record(name, worker.Run());
    });
  }
  for (std::thread& t : threads) t.join();
  record("scheduler", scheduler.Wait());
  return first_error;
}

}  // namespace pstrain
