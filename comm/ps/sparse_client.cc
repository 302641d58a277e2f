#include "comm/ps/sparse_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "comm/transport/completion.h"
#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"

namespace pstrain {
void SparseClient::Group(const std::vector<RowTransfer>& transfers) {
  groups_.resize(transfers.size());
  for (size_t t = 0; t < transfers.size(); ++t)
    GroupByServer(*transfers[t].ids, static_cast<int>(servers_.size()), &groups_[t]);
}

Status SparseClient::Pull(const std::vector<RowTransfer>& transfers, int64_t min_clock) {
  const size_t servers = servers_.size();
  Group(transfers);
  // received[t * servers + s]: transfer t's rows from server s. Kept from
  // call to call: fresh pages would cost a fault every 4 KiB.
  std::vector<std::vector<float>>& received = received_;
  received.resize(transfers.size() * servers);
  direct_.assign(transfers.size() * servers, false);
  for (size_t t = 0; t < transfers.size(); ++t)
    for (size_t s = 0; s < servers; ++s) {
      const ServerGroups& g = groups_[t];
      const uint32_t* index = g.unique_index.data() + g.offsets[s];
      const size_t n = g.size(static_cast<int>(s));
      bool run = true;
      for (size_t k = 1; k < n && run; ++k) run = index[k] == index[0] + k;
      direct_[t * servers + s] = run;
    }
  size_t requests = 0;
  for (size_t t = 0; t < transfers.size(); ++t)
    for (size_t s = 0; s < servers; ++s)
      requests += (groups_[t].size(static_cast<int>(s)) + IdsPerPull(transfers[t].dim) - 1) /
                  IdsPerPull(transfers[t].dim);
  last_pull_bytes_ = 0;
  if (requests == 0) return Status::OK();
  Completion<Status> done;
  // One part more than the requests: the posted loop itself, reported last.
  // A call on a closed connection answers at once, inside the loop below;
  // without it the last such answer would free this caller (and its frame,
  // which the loop still reads) before the loop is done.
  auto answers = CountDown::Into(done, requests + 1);
  bool posted = loop_->Post([&, answers] {
    PSTRAIN_DCHECK_ON_LOOP(loop_);
    for (size_t t = 0; t < transfers.size(); ++t) {
      const RowTransfer& x = transfers[t];
      for (size_t s = 0; s < servers; ++s) {
        const size_t n = groups_[t].size(static_cast<int>(s));
        if (n == 0) continue;
        // Rows whose places are one run (one server, or ids ordered by
        // server) land straight in the destination.
        const uint32_t* index = groups_[t].unique_index.data() + groups_[t].offsets[s];
        float* into = x.rows + static_cast<size_t>(index[0]) * x.dim;
        if (!direct_[t * servers + s]) {
          received[t * servers + s].resize(n * x.dim);
          into = received[t * servers + s].data();
        }
        const size_t per_request = IdsPerPull(x.dim);
        for (size_t first = 0; first < n; first += per_request) {
          const size_t count = std::min(per_request, n - first);
          Payload ids{
              reinterpret_cast<const uint8_t*>(groups_[t].ids_of(static_cast<int>(s)) + first),
              count * sizeof(int64_t), nullptr};
          Buffer place{reinterpret_cast<uint8_t*>(into + first * x.dim),
                       count * x.dim * sizeof(float), nullptr};
          servers_[s]->Call(
              SparsePullRequest{*x.table, worker_, min_clock, static_cast<int>(servers)},
              [answers, s, table = x.table](StatusOr<Incoming> reply) {
                answers->Report(reply.status().WithContext(
                    fmt::format("pull of table '{}' rows from server {}", *table, s)));
              },
              std::move(ids), place);
        }
      }
    }
    answers->Report(Status::OK());
  });
  if (!posted) return Aborted("the worker is stopping");
  PSTRAIN_RETURN_IF_ERROR(done.Wait());
  for (size_t t = 0; t < transfers.size(); ++t) {
    const RowTransfer& x = transfers[t];
    for (size_t s = 0; s < servers; ++s) {
      const ServerGroups& g = groups_[t];
      const uint32_t* index = g.unique_index.data() + g.offsets[s];
      const std::vector<float>& rows = received[t * servers + s];
      if (!direct_[t * servers + s])
        for (size_t k = 0; k < g.size(static_cast<int>(s)); ++k)
          std::memcpy(x.rows + static_cast<size_t>(index[k]) * x.dim, rows.data() + k * x.dim,
                      x.dim * sizeof(float));
      last_pull_bytes_ += static_cast<int64_t>(g.size(static_cast<int>(s)) * x.dim * sizeof(float));
    }
  }
  return Status::OK();
}

Status SparseClient::Push(const std::vector<RowTransfer>& transfers, int64_t clock) {
  const size_t servers = servers_.size();
  Group(transfers);
  // payloads[t * servers + s]: ids then rows, as the wire wants them.
  std::vector<std::vector<uint8_t>> payloads(transfers.size() * servers);
  for (size_t t = 0; t < transfers.size(); ++t) {
    const RowTransfer& x = transfers[t];
    const ServerGroups& g = groups_[t];
    for (size_t s = 0; s < servers; ++s) {
      const size_t n = g.size(static_cast<int>(s));
      std::vector<uint8_t>& p = payloads[t * servers + s];
      p.resize(n * (sizeof(int64_t) + x.dim * sizeof(float)));
      std::memcpy(p.data(), g.ids_of(static_cast<int>(s)), n * sizeof(int64_t));
      float* rows = reinterpret_cast<float*>(p.data() + n * sizeof(int64_t));
      const uint32_t* index = g.unique_index.data() + g.offsets[s];
      for (size_t k = 0; k < n; ++k)
        std::memcpy(rows + k * x.dim, x.rows + static_cast<size_t>(index[k]) * x.dim,
                    x.dim * sizeof(float));
    }
  }
  if (payloads.empty()) return Status::OK();
  Completion<Status> done;
  // One part more than the pushes: the posted loop itself (as in Pull).
  auto answers = CountDown::Into(done, payloads.size() + 1);
  bool posted = loop_->Post([&, answers] {
    PSTRAIN_DCHECK_ON_LOOP(loop_);
    for (size_t t = 0; t < transfers.size(); ++t) {
      for (size_t s = 0; s < servers; ++s) {
        const std::vector<uint8_t>& p = payloads[t * servers + s];
        const int64_t n = static_cast<int64_t>(groups_[t].size(static_cast<int>(s)));
        servers_[s]->Call(
            SparsePushRequest{*transfers[t].table, worker_, clock, n, static_cast<int>(servers)},
            [answers, s, table = transfers[t].table](StatusOr<Incoming> reply) {
              answers->Report(reply.status().WithContext(
                  fmt::format("push of table '{}' rows to server {}", *table, s)));
            },
            Payload{p.data(), p.size(), nullptr});
      }
    }
    answers->Report(Status::OK());
  });
  if (!posted) return Aborted("the worker is stopping");
  return done.Wait();
}

}  // namespace pstrain
