// A whole job on one machine: the scheduler, the servers and the workers run
// as threads of this process, on 127.0.0.1 with ports chosen by the system.
// This is `pstrain local`, and the in-process cluster the tests use.
#pragma once

#include <functional>
#include <string>

#include "roles/worker/job.h"
#include "src/common/config/config.h"
#include "src/common/config/options.h"
#include "src/common/logging.h"

namespace pstrain {

struct LocalJobOptions {
  ClusterOptions cluster;  // sched_host/sched_port are ignored: 127.0.0.1, any port
  Config config;
  // Makes worker i's job; none: workers only do the handshake.
  std::function<std::unique_ptr<WorkerJob>(int index)> make_job;
  // Makes each node's logger from its name ("scheduler", "server 0", ...):
  // make it with MakeLogger (or MakeLoggerWithSinks) so that the label follows
  // the rank the node gets.
  std::function<Logger(const std::string& name)> make_logger = [](const std::string& name) {
    return MakeLogger(name);
  };
};

// Runs the job to its end. OK when every node finished cleanly; otherwise the
// first failure, naming the node.
Status RunLocalJob(const LocalJobOptions& options);

}  // namespace pstrain
