// ServerRoutes: which server answers for each server rank's table rows in
// a job with replicated servers (roles/server/replication.h). Rows are
// placed on a server rank (comm/ps/row_placement.h); when that server is
// lost, the scheduler's ServerView names the server holding them now
// (owners), and a worker sends them there. Shared by a worker's
// SparseClients (comm/ps/sparse_client.h), updated by the worker as views
// come and links are made again.
//
// Thread-safety: the event loop's only.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "comm/transport/connection.h"

namespace pstrain {

class ServerRoutes {
 public:
  explicit ServerRoutes(std::vector<Connection::Ptr> servers) : servers_(std::move(servers)) {}

  // A view's owners: rank r's rows are on server owners[r].
  void UseOwners(std::vector<int> owners) { owners_ = std::move(owners); }
  void UseConnection(int rank, Connection::Ptr conn) {
    if (rank >= 0 && static_cast<size_t>(rank) < servers_.size())
      servers_[static_cast<size_t>(rank)] = std::move(conn);
  }
  // The job is over or paused: no view will come, and nothing waits for one.
  void Stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }
  // The link to the server holding rank `origin`'s rows (null: none yet).
  Connection::Ptr Route(int origin) const {
    int at = origin;
    if (static_cast<size_t>(origin) < owners_.size()) at = owners_[static_cast<size_t>(origin)];
    if (at < 0 || static_cast<size_t>(at) >= servers_.size()) return nullptr;
    return servers_[static_cast<size_t>(at)];
  }

 private:
  std::vector<Connection::Ptr> servers_;
  std::vector<int> owners_;  // empty: each rank holds its own
  bool stopped_ = false;
};

}  // namespace pstrain
