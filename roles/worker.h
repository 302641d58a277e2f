// Worker: computes gradients and talks to the servers. In this version it
// joins the job, connects to every server, passes the start barrier with the
// rest of the job and reports Done; training arrives with later issues.
#pragma once

#include <vector>

#include "roles/node.h"

namespace pstrain {

class Worker {
 public:
  Worker(NodeOptions options, Logger log);
  // Runs the worker's part of the job; blocks until it is over.
  Status Run();

 private:
  // Connects to every server of `topology` and greets it. Blocking.
  Status ConnectServers(const Topology& topology);

  Node node_;
  std::vector<Connection::Ptr> servers_;  // by server rank; loop-thread use only
};

}  // namespace pstrain
