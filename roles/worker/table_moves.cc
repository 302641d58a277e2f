#include "roles/worker/table_moves.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "comm/ps/row_placement.h"
#include "comm/transport/completion.h"
#include "comm/transport/event_loop.h"
#include "roles/placement/row_move_codec.h"
#include "src/common/mutex.h"

namespace pstrain {
namespace {

struct Request {
  int rank;
  MessageBody body;
  std::shared_ptr<const std::string> payload;  // may be null
};

// Sends every request at once and waits for every reply; the first
// failure, named by its server, fails the call.
StatusOr<std::vector<Incoming>> CallEach(EventLoop* loop,
                                         const std::vector<Connection::Ptr>& servers,
                                         std::vector<Request> requests) {
  struct Replies {
    Mutex mutex;
    std::vector<Incoming> got GUARDED_BY(mutex);
  };
  auto replies = std::make_shared<Replies>();
  {
    MutexLock lock(&replies->mutex);
    replies->got.resize(requests.size());
  }
  Completion<Status> done;
  // One part more than the requests: the posted loop itself, reported last
  // (a call on a closed connection answers inside it).
  auto answers = CountDown::Into(done, requests.size() + 1);
  const bool posted = loop->Post([&, answers, replies] {
    for (size_t i = 0; i < requests.size(); ++i) {
      const Request& r = requests[i];
      Payload payload;
      if (r.payload)
        payload = Payload{reinterpret_cast<const uint8_t*>(r.payload->data()), r.payload->size(),
                          r.payload};
      servers[static_cast<size_t>(r.rank)]->Call(
          r.body,
          [answers, replies, i, rank = r.rank](StatusOr<Incoming> reply) {
            if (!reply.ok())
              return answers->Report(reply.status().WithContext(fmt::format("server {}", rank)));
            {
              MutexLock lock(&replies->mutex);
              replies->got[i] = std::move(*reply);
            }
            answers->Report(Status::OK());
          },
          std::move(payload));
    }
    answers->Report(Status::OK());
  });
  if (!posted) return Aborted("the worker is stopping");
  PSTRAIN_RETURN_IF_ERROR(done.Wait());
  MutexLock lock(&replies->mutex);
  return std::move(replies->got);
}

// Rows and digest sum per table, over the servers of connections `ranks`.
using Digests = std::map<std::string, std::pair<int64_t, uint64_t>>;
StatusOr<Digests> DigestOf(EventLoop* loop, const std::vector<Connection::Ptr>& servers,
                           const std::vector<int>& ranks) {
  std::vector<Request> requests;
  for (int s : ranks) requests.push_back({s, RowsDigestRequest{}, nullptr});
  auto replies = CallEach(loop, servers, std::move(requests));
  if (!replies.ok()) return replies.status();
  Digests out;
  for (const Incoming& in : *replies) {
    const auto* d = std::get_if<RowsDigestReply>(&in.message.body);
    if (d == nullptr) return Internal("a server answered a digest request with something else");
    for (size_t t = 0; t < d->tables.size(); ++t) {
      out[d->tables[t]].first += d->rows[t];
      out[d->tables[t]].second += d->sums[t];
    }
  }
  return out;
}

}  // namespace

StatusOr<RowMoves> MoveTableRows(EventLoop* loop, const std::vector<Connection::Ptr>& servers,
                                 int from, int to, const std::vector<int>& slots, int64_t step,
                                 RowsPhase phase, bool check, Logger log) {
  if (from == to) return RowMoves{};
  const bool grows = to > from;
  if (static_cast<int>(servers.size()) < std::max(from, to) ||
      (!slots.empty() && (grows || static_cast<int>(slots.size()) != to)))
    return Internal(
        fmt::format("moving rows from {} servers to {} with {} connections and {} slots", from, to,
                    servers.size(), slots.size()));
  // Today's rank of each new rank's server, and the other way round (-1:
  // it leaves).
  std::vector<int> old_of_new(static_cast<size_t>(to)), new_of_old(servers.size(), -1);
  for (int s = 0; s < to; ++s) {
    old_of_new[s] = slots.empty() ? s : slots[s];
    new_of_old[old_of_new[s]] = s;
  }
  check = check && phase != RowsPhase::kCopy;
  Digests before;
  if (check) {
    std::vector<int> ranks(static_cast<size_t>(from));
    for (int r = 0; r < from; ++r) ranks[r] = r;
    auto digests = DigestOf(loop, servers, ranks);
    if (!digests.ok()) return digests.status().WithContext("fingerprinting the tables before");
    before = std::move(*digests);
  }
  // Consistent placement (comm/ps/row_placement.h): on a growth only the
  // new servers take rows, from every old one; on a shrink only the
  // servers whose rank changes give rows up (the leavers all of theirs, a
  // server taking a leaver's rank those the new count places elsewhere),
  // to every server that stays.
  std::vector<Request> hand_offs;
  for (int r = 0; r < from; ++r)
    if (grows || new_of_old[r] != r)
      hand_offs.push_back({r, RowsHandOffRequest{to, new_of_old[r], phase}, nullptr});
  const auto begin = std::chrono::steady_clock::now();
  auto handed = CallEach(loop, servers, std::move(hand_offs));
  const auto handed_at = std::chrono::steady_clock::now();
  if (!handed.ok()) return handed.status().WithContext("handing rows off");
  // Each server's rows, split by the server they go to, per table.
  RowMoves moves;
  int64_t table_step = 0;
  std::map<int, std::map<std::string, MovedRows>> to_server;
  // Every table, with no rows and the largest schedule clock: each server
  // taking rows hears of every table, so a joiner's schedules catch up
  // even where no row comes to it.
  std::map<std::string, MovedRows> every_table;
  for (const Incoming& in : *handed) {
    const auto* reply = std::get_if<RowsHandOffReply>(&in.message.body);
    if (reply == nullptr) return Internal("a server answered a hand-off with something else");
    table_step = std::max(table_step, reply->step);
    moves.bytes += static_cast<int64_t>(in.payload.size);
    auto tables = DecodeMovedRows(in.payload.data, in.payload.size);
    if (!tables.ok()) return tables.status().WithContext("rows handed off");
    for (MovedRows& t : *tables) {
      moves.rows += static_cast<int64_t>(t.rows.size());
      MovedRows& seen = every_table[t.table];
      if (seen.table.empty())
        seen = MovedRows{t.table, t.dim, t.slots, 0, RowBatch(t.rows.floats), {}};
      seen.table_updates = std::max(seen.table_updates, t.table_updates);
      const auto into = [&](int64_t id) -> MovedRows& {
        MovedRows& dest = to_server[ServerOfId(id, to)][t.table];
        if (dest.table.empty())
          dest = MovedRows{t.table, t.dim, t.slots, 0, RowBatch(t.rows.floats), {}};
        return dest;
      };
      for (size_t i = 0; i < t.rows.size(); ++i)
        into(t.rows.ids[i])
            .rows.Add(t.rows.ids[i], t.rows.row(i), t.rows.last_touched[i], t.rows.updates[i]);
      for (int64_t id : t.gone) into(id).gone.push_back(id);
    }
  }
  std::vector<Request> take_overs;
  const int take_first = grows ? from : 0;
  for (const auto& [s, tables] : to_server)
    if (s < take_first)  // a row the server it came from should not have held
      return Internal(fmt::format("rows handed off for server {}, which takes none", s));
  for (int s = take_first; s < to; ++s) {
    std::vector<MovedRows> rows;
    for (auto& [name, empty] : every_table) {
      auto it = to_server[s].find(name);
      rows.push_back(it != to_server[s].end() ? std::move(it->second) : empty);
      rows.back().table_updates = empty.table_updates;
    }
    auto bytes = std::make_shared<std::string>();
    EncodeMovedRows(rows, bytes.get());
    take_overs.push_back(
        {old_of_new[s], RowsTakeOverRequest{to, std::max(step, table_step), s, phase}, bytes});
  }
  const auto split_at = std::chrono::steady_clock::now();
  auto taken = CallEach(loop, servers, std::move(take_overs));
  const auto ms = [](auto from, auto to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };
  log->info(
      "table rows{}: handed off in {:.0f} ms, sorted by server in {:.0f} ms, taken over in {:.0f} "
      "ms",
      phase == RowsPhase::kCopy    ? " copied ahead"
      : phase == RowsPhase::kDelta ? " changed since the copy ahead"
                                   : "",
      ms(begin, handed_at), ms(handed_at, split_at),
      ms(split_at, std::chrono::steady_clock::now()));
  if (!taken.ok()) return taken.status().WithContext("installing the rows handed off");
  if (check) {
    auto after = DigestOf(loop, servers, old_of_new);
    if (!after.ok()) return after.status().WithContext("fingerprinting the tables after");
    int64_t rows = 0;
    for (const auto& [name, d] : before) {
      auto it = after->find(name);
      if (it == after->end() || it->second != d)
        return Internal(fmt::format(
            "table '{}' changed in the move: {} rows before, {} after, or their values and state "
            "differ",
            name, d.first, it == after->end() ? 0 : it->second.first));
      rows += d.first;
    }
    log->info(
        "table rows check at step {}: {} rows in {} tables, the same values and optimizer state "
        "before and after the move",
        step, rows, before.size());
  }
  return moves;
}

}  // namespace pstrain
