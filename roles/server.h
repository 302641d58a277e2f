// Server: holds its shard of the PS-managed parameters and answers workers.
// In this version it joins the job, greets the workers that connect, takes
// part in barriers, and stops when the scheduler ends the job; push/pull and
// the optimizers arrive with the parameter-server core.
#pragma once

#include "roles/node.h"

namespace pstrain {

class Server {
 public:
  Server(NodeOptions options, Logger log);
  // Runs the server's part of the job; blocks until it is over.
  Status Run();

 private:
  void OnPeerRequest(const Connection::Ptr& conn, Incoming&& in);

  Node node_;
};

}  // namespace pstrain
