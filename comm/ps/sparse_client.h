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
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/ps/row_placement.h"
#include "src/common/status.h"

namespace pstrain {

class Connection;  // comm/transport/connection.h
class EventLoop;   // comm/transport/event_loop.h

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

  // The job's servers changed live (roles/worker/grow.h): rows are placed
  // over `servers` from the next call on. Not during a call.
  void UseServers(std::vector<std::shared_ptr<Connection>> servers) {
    servers_ = std::move(servers);
  }
  int servers() const { return static_cast<int>(servers_.size()); }
  // A live change of workers gave this worker another rank. Not during a call.
  void UseWorkerRank(int rank) { worker_ = rank; }

  // Bytes of rows the last Pull received.
  int64_t last_pull_bytes() const { return last_pull_bytes_; }

 private:
  // groups_[t]: transfer t's ids by server.
  void Group(const std::vector<RowTransfer>& transfers);

  EventLoop* loop_;
  std::vector<std::shared_ptr<Connection>> servers_;
  int worker_;
  std::vector<ServerGroups> groups_;
  std::vector<std::vector<float>> received_;  // Pull's, by table and server
  std::vector<bool> direct_;                  // Pull's: rows placed straight in the destination
  int64_t last_pull_bytes_ = 0;
};

}  // namespace pstrain
