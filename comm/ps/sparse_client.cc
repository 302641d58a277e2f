#include "comm/ps/sparse_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>

#include "comm/ps/pull_reply.h"
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
  std::vector<Request> requests;
  for (size_t t = 0; t < transfers.size(); ++t)
    for (size_t s = 0; s < servers; ++s) {
      const ServerGroups& g = groups_[t];
      const uint32_t* index = g.unique_index.data() + g.offsets[s];
      const size_t n = g.size(static_cast<int>(s));
      bool run = true;
      for (size_t k = 1; k < n && run; ++k) run = index[k] == index[0] + k;
      // Rows whose places are one run (one server, or ids ordered by
      // server) land straight in the destination.
      direct_[t * servers + s] = run;
      if (!run) received[t * servers + s].resize(n * transfers[t].dim);
      const size_t per_request = IdsPerPull(transfers[t].dim);
      for (size_t first = 0; first < n; first += per_request)
        requests.push_back({t, s, first, std::min(per_request, n - first)});
    }
  last_pull_bytes_ = 0;
  if (requests.empty()) return Status::OK();
  PSTRAIN_RETURN_IF_ERROR(
      Send(requests, [&](const Request& r, Connection& conn, int origin, Answer answer) {
        const RowTransfer& x = transfers[r.t];
        const int s = static_cast<int>(r.s);
        const uint32_t* index = groups_[r.t].unique_index.data() + groups_[r.t].offsets[r.s];
        float* into = direct_[r.t * servers + r.s] ? x.rows + static_cast<size_t>(index[0]) * x.dim
                                                   : received[r.t * servers + r.s].data();
        Payload ids{reinterpret_cast<const uint8_t*>(groups_[r.t].ids_of(s) + r.first),
                    r.count * sizeof(int64_t), nullptr};
        Buffer place{reinterpret_cast<uint8_t*>(into + r.first * x.dim),
                     r.count * x.dim * sizeof(float), nullptr};
        conn.Call(
            SparsePullRequest{*x.table, worker_, min_clock, static_cast<int>(servers), origin},
            [answer, s, table = x.table](StatusOr<Incoming> reply) {
              answer(reply.status().WithContext(
                  fmt::format("pull of table '{}' rows from server {}", *table, s)));
            },
            std::move(ids), place);
      }));
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
  std::vector<Request> requests;
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
      requests.push_back({t, s, 0, n});
    }
  }
  if (requests.empty()) return Status::OK();
  return Send(requests, [&](const Request& r, Connection& conn, int origin, Answer answer) {
    const std::vector<uint8_t>& p = payloads[r.t * servers + r.s];
    conn.Call(
        SparsePushRequest{*transfers[r.t].table, worker_, clock, static_cast<int64_t>(r.count),
                          static_cast<int>(servers), origin},
        [answer, s = r.s, table = transfers[r.t].table](StatusOr<Incoming> reply) {
          answer(reply.status().WithContext(
              fmt::format("push of table '{}' rows to server {}", *table, s)));
        },
        Payload{p.data(), p.size(), nullptr});
  });
}

Status SparseClient::Norms(const std::vector<const std::string*>& tables, int64_t clock,
                           std::vector<double>* squares) {
  const size_t servers = servers_.size();
  std::vector<double> shares(tables.size() * servers, 0.0);
  std::vector<Request> requests;
  for (size_t t = 0; t < tables.size(); ++t)
    for (size_t s = 0; s < servers; ++s) requests.push_back({t, s, 0, 0});
  Status st = Send(requests, [&](const Request& r, Connection& conn, int origin, Answer answer) {
    SparsePullRequest pull{*tables[r.t], worker_, clock, static_cast<int>(servers), origin};
    pull.norm = true;
    double* share = &shares[r.t * servers + r.s];
    conn.Call(std::move(pull),
              [answer, share, s = r.s, table = tables[r.t]](StatusOr<Incoming> reply) {
                StatusOr<double> squares = SquaredNormIn<SparsePullReply>(reply);
                if (squares.ok()) *share = *squares;
                const Status got = squares.status();
                answer(got.WithContext(fmt::format("norm of table '{}' on server {}", *table, s)));
              });
  });
  if (!st.ok()) return st;
  squares->assign(tables.size(), 0.0);
  for (size_t t = 0; t < tables.size(); ++t)
    for (size_t s = 0; s < servers; ++s) (*squares)[t] += shares[t * servers + s];
  return Status::OK();
}

Status SparseClient::Clip(const std::vector<const std::string*>& tables, int64_t clock,
                          float factor) {
  const size_t servers = servers_.size();
  std::vector<Request> requests;
  for (size_t t = 0; t < tables.size(); ++t)
    for (size_t s = 0; s < servers; ++s) requests.push_back({t, s, 0, 0});
  return Send(requests, [&](const Request& r, Connection& conn, int origin, Answer answer) {
    SparsePushRequest push{*tables[r.t], worker_, clock, 0, static_cast<int>(servers), origin};
    push.clip = factor;
    conn.Call(std::move(push), [answer, s = r.s, table = tables[r.t]](StatusOr<Incoming> reply) {
      answer(reply.status().WithContext(
          fmt::format("clip factor of table '{}' to server {}", *table, s)));
    });
  });
}

Connection::Ptr SparseClient::Route(size_t server) const {
  if (routes_) return routes_->Route(static_cast<int>(server));
  return server < servers_.size() ? servers_[server] : nullptr;
}

Status SparseClient::Send(const std::vector<Request>& requests, const Issue& issue) {
  // The requests not answered yet, by index: all of them, then those
  // whose link closed.
  std::vector<size_t> pending(requests.size());
  std::iota(pending.begin(), pending.end(), size_t{0});
  const auto deadline = std::chrono::steady_clock::now() + patience_;
  for (;;) {
    std::vector<Status> outcome(pending.size());
    std::vector<const Connection*> used(pending.size(), nullptr);
    Completion<Status> done;
    // One part more than the requests: the posted loop itself, reported
    // last. A call on a closed connection answers at once, inside the loop
    // below; without it the last such answer would free this caller (and
    // its frame, which the loop still reads) before the loop is done.
    auto answers = CountDown::Into(done, pending.size() + 1);
    bool posted = loop_->Post([&, answers] {
      PSTRAIN_DCHECK_ON_LOOP(loop_);
      for (size_t k = 0; k < pending.size(); ++k) {
        const Request& r = requests[pending[k]];
        Connection::Ptr conn = Route(r.s);
        used[k] = conn.get();
        auto answer = [answers, &outcome, k](const Status& st) {
          outcome[k] = st;
          answers->Report(st);
        };
        if (!conn) {
          answer(Unavailable(fmt::format("no link to the server holding server {}'s rows", r.s)));
          continue;
        }
        issue(r, *conn, routes_ ? static_cast<int>(r.s) : -1, answer);
      }
      answers->Report(Status::OK());
    });
    if (!posted) return Aborted("the worker is stopping");
    const Status st = done.Wait();
    if (st.ok() || !routes_) return st;
    // Requests whose server's link is gone wait for the view naming the
    // server that holds their rows now, and go there; a refusal stands.
    std::vector<size_t> again;
    std::vector<const Connection*> failed_on;
    for (size_t k = 0; k < pending.size(); ++k) {
      if (outcome[k].ok()) continue;
      if (outcome[k].code() != StatusCode::kUnavailable) return outcome[k];
      again.push_back(pending[k]);
      failed_on.push_back(used[k]);
    }
    if (!WaitForRoutes(requests, again, failed_on, deadline))
      return st.WithContext(
          fmt::format("no server took the rows over within {} ms", patience_.count()));
    pending = std::move(again);
  }
}

bool SparseClient::WaitForRoutes(const std::vector<Request>& requests,
                                 const std::vector<size_t>& which,
                                 const std::vector<const Connection*>& failed_on,
                                 std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    bool stopped = false;
    const bool routed = loop_->Call<bool>(
        [&] {
          stopped = routes_->stopped();
          for (size_t k = 0; k < which.size(); ++k) {
            Connection::Ptr now = Route(requests[which[k]].s);
            if (!now || now->closed() || now.get() == failed_on[k]) return false;
          }
          return true;
        },
        false);
    if (routed) return true;
    if (stopped || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace pstrain
