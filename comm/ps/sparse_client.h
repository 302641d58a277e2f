// SparseClient: a worker's pulls and pushes of embedding rows held by the
// servers (roles/server/table_host.h), as KvClient (comm/ps/kv_client.h) is for dense
// tensors. The caller gives, per table, a batch's unique ids; each server
// gets one request per table with the ids it holds (comm/ps/row_placement.h),
// a pull of more than 256 KiB of rows in parts of that size, every request
// of a call in flight at once, and the rows come back in the order of the
// ids.
//
// Each request names the server count its ids were placed over, so that a
// server whose placement changed (a live change of the server set,
// roles/server/table_moves.h) refuses it instead of serving rows it no
// longer holds.
//
// Threads: the calls block their caller (never the loop thread) until every
// server has answered; the connections are used on the loop only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/ps/row_placement.h"
#include "comm/ps/server_routes.h"
#include "src/common/status.h"

namespace pstrain {

class EventLoop;  // comm/transport/event_loop.h

// One table's part of a call: `ids` (distinct) and their rows, dim floats
// each: where a pull puts them, or what a push sends.
struct RowTransfer {
  const std::string* table;
  int dim;
  const std::vector<int64_t>* ids;
  float* rows;
};

class SparseClient {
 public:
  SparseClient(EventLoop* loop, std::vector<std::shared_ptr<Connection>> servers, int worker)
      : loop_(loop), servers_(std::move(servers)), worker_(worker) {}

  // A server looks rows up before it can send them; a pull of more rows
  // than this many bytes goes to a server in parts of at most this size, so
  // that it looks up one part while the previous one is on the wire (16K
  // rows of dim 64 from a 1M-row table: 4.8 ms in one request, 3.3-3.6 ms
  // in parts of 256 KiB).
  static constexpr size_t kRowBytesPerPull = size_t{256} << 10;
  static size_t IdsPerPull(int dim) {
    return std::max<size_t>(1, kRowBytesPerPull / (static_cast<size_t>(dim) * sizeof(float)));
  }

  // The rows of every transfer's ids, once each table has applied
  // `min_clock` steps. A transfer with no ids sends nothing. In async/ssp
  // mode a push may land between the parts of a pull, so one server's rows
  // can come from different clocks, all >= min_clock.
  Status Pull(const std::vector<RowTransfer>& transfers, int64_t min_clock);
  // Pushes each transfer's rows (gradients) for step `clock`. Every server
  // gets a request per table, empty when it holds none of the ids: in sync
  // mode a step is applied once every worker's push of it is in.
  Status Push(const std::vector<RowTransfer>& transfers, int64_t clock);

  // train.clip_norm (roles/worker/norm_clip.h): (*squares)[t] gets the sum
  // over the servers of table *tables[t]'s share of step `clock`'s squared
  // norm, once every worker's rows of the step are in.
  Status Norms(const std::vector<const std::string*>& tables, int64_t clock,
               std::vector<double>* squares);
  // Step `clock`'s clip factor to every server's part of each table.
  Status Clip(const std::vector<const std::string*>& tables, int64_t clock, float factor);
  // The job's servers changed live (roles/worker/grow.h): rows are placed
  // over `servers` from the next call on. Not during a call.
  void UseServers(std::vector<std::shared_ptr<Connection>> servers) {
    servers_ = std::move(servers);
  }
  int servers() const { return static_cast<int>(servers_.size()); }
  // A live change of workers gave this worker another rank. Not during a call.
  void UseWorkerRank(int rank) { worker_ = rank; }
  // Replicated servers: each request goes where `routes` says the rows of
  // its server rank are, naming that rank, and one whose link closes waits
  // at most `patience` for the view that names the server holding them
  // now, then goes there (a push its old server applied before it died is
  // acknowledged there, not applied twice). Not during a call.
  void EnableFailover(std::shared_ptr<ServerRoutes> routes, std::chrono::milliseconds patience) {
    routes_ = std::move(routes);
    patience_ = patience;
  }

  // Bytes of rows the last Pull received.
  int64_t last_pull_bytes() const { return last_pull_bytes_; }

 private:
  // groups_[t]: transfer t's ids by server.
  void Group(const std::vector<RowTransfer>& transfers);

  // One request of a call: transfer t's ids of server s, from `first`,
  // `count` of them.
  struct Request {
    size_t t = 0, s = 0, first = 0, count = 0;
  };
  using Answer = std::function<void(const Status&)>;
  // Makes the call for a request on `conn` (origin: the rank to name, -1
  // for none) and answers once its reply is in; on the loop thread.
  using Issue = std::function<void(const Request&, Connection& conn, int origin, Answer)>;
  // Issues every request at once and waits for their answers; with
  // failover, those whose link closed go again once routed elsewhere.
  Status Send(const std::vector<Request>& requests, const Issue& issue);
  // Until each request in `which` has a live route other than the link it
  // failed on, or `deadline`; false when that passed.
  bool WaitForRoutes(const std::vector<Request>& requests, const std::vector<size_t>& which,
                     const std::vector<const Connection*>& failed_on,
                     std::chrono::steady_clock::time_point deadline);
  Connection::Ptr Route(size_t server) const;  // loop thread

  EventLoop* loop_;
  std::vector<std::shared_ptr<Connection>> servers_;
  int worker_;
  std::vector<ServerGroups> groups_;
  std::vector<std::vector<float>> received_;  // Pull's, by table and server
  std::vector<bool> direct_;                  // Pull's: rows placed straight in the destination
  int64_t last_pull_bytes_ = 0;
  std::shared_ptr<ServerRoutes> routes_;  // null: no failover
  std::chrono::milliseconds patience_{0};
};

}  // namespace pstrain
