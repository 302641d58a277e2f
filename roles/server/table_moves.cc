// Live moves of table rows (roles/server/table_moves.h): the table host's
// side, on its thread, and the server's requests, on the loop.
#include "roles/server/table_moves.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "comm/ps/row_placement.h"
#include "roles/placement/row_move_codec.h"
#include "roles/server/server.h"
#include "roles/server/table_host.h"

namespace pstrain {
namespace {

double MsSince(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
      .count();
}

}  // namespace

void TableHost::HandOffRows(int servers, int rank, std::function<void(StatusOr<HandedRows>)> done) {
  thread_.Post([this, servers, rank, done] {
    const auto begin = std::chrono::steady_clock::now();
    std::vector<MovedRows> taken;
    HandedRows out;
    auto elsewhere = [&](int64_t id) { return rank < 0 || ServerOfId(id, servers) != rank; };
    for (auto& [name, t] : tables_) {
      auto rows = t->table.TakeRows(elsewhere);
      if (!rows.ok()) {
        // Rows already taken go back where they were; should the disk fail
        // that too, the move fails and the job recovers from its newest
        // checkpoint (elastic jobs have one).
        for (MovedRows& m : taken)
          if (Status back = tables_[m.table]->table.PutRows(m.rows); !back.ok())
            log_->error("rows of table '{}' not put back: {}", m.table, back.message());
        return done(rows.status().WithContext(fmt::format("handing off rows of table '{}'", name)));
      }
      const uint32_t dim = static_cast<uint32_t>(t->table.options().dim);
      const uint32_t slots = static_cast<uint32_t>(rows->floats / dim) - 1;
      out.rows += static_cast<int64_t>(rows->size());
      out.step = std::max(out.step, t->core.step());
      taken.push_back(MovedRows{name, dim, slots, t->table.table_updates(), std::move(*rows)});
    }
    EncodeMovedRows(taken, &out.bytes);
    servers_ = servers;
    log_->info(
        "handed off {} table rows ({} bytes) in {:.0f} ms: rows are placed over {} servers from "
        "now on",
        out.rows, out.bytes.size(), MsSince(begin), servers);
    done(std::move(out));
  });
}

void TableHost::TakeOverRows(int servers, int rank, int64_t step, Buffer bytes,
                             std::function<void(Status)> done) {
  thread_.Post([this, servers, rank, step, bytes = std::move(bytes), done] {
    const auto begin = std::chrono::steady_clock::now();
    auto moved = DecodeMovedRows(bytes.data, bytes.size);
    if (!moved.ok()) return done(moved.status().WithContext("rows taken over"));
    // Everything is checked before anything is installed.
    for (const MovedRows& m : *moved) {
      HostedTable* t = Find(m.table);
      if (t == nullptr)
        return done(InvalidArgument(fmt::format("rows of unknown table '{}' taken over", m.table)));
      if (static_cast<int>(m.dim) != t->table.options().dim)
        return done(InvalidArgument(fmt::format("rows of table '{}' taken over have dim {}, not {}",
                                                m.table, m.dim, t->table.options().dim)));
      for (int64_t id : m.rows.ids)
        if (ServerOfId(id, servers) != rank)
          return done(InvalidArgument(fmt::format(
              "row {} of table '{}' taken over belongs to server {} of {}, not to this one ({})",
              id, m.table, ServerOfId(id, servers), servers, rank)));
      // Rows it has, ids twice, another row width: refused before any is in.
      if (Status st = t->table.CheckNewRows(m.rows); !st.ok())
        return done(st.WithContext("rows taken over"));
    }
    // A server that joined live starts its tables at the job's step, and
    // their lr schedules where their rows' were; so does one that gave its
    // rows away earlier and takes some back (its tables stopped then).
    for (const MovedRows& m : *moved)
      if (HostedTable* t = Find(m.table); t->core.step() < step)
        t->table.CatchUpSchedule(m.table_updates);
    for (auto& [name, t] : tables_)
      if (t->core.step() < step) t->core.RestoreStep(step);
    int64_t rows = 0;
    for (const MovedRows& m : *moved) {
      // Only the disk can fail here; the move then fails, and the job
      // recovers from its newest checkpoint (elastic jobs have one).
      Status st = Find(m.table)->table.PutCheckedRows(m.rows);
      if (!st.ok()) return done(st.WithContext(fmt::format("taking over rows of '{}'", m.table)));
      rows += static_cast<int64_t>(m.rows.size());
    }
    servers_ = servers;
    rank_ = rank;
    log_->info("took over {} table rows in {:.0f} ms: rows are placed over {} servers from now on",
               rows, MsSince(begin), servers);
    done(Status::OK());
  });
}

void TableHost::Digest(std::function<void(StatusOr<RowsDigestReply>)> done) {
  thread_.Post([this, done] {
    RowsDigestReply out;
    for (auto& [name, t] : tables_) {
      auto digest = t->table.Digest();
      if (!digest.ok()) return done(digest.status().WithContext("table " + name));
      out.tables.push_back(name);
      out.rows.push_back(digest->rows);
      out.sums.push_back(digest->sum);
    }
    done(std::move(out));
  });
}

void Server::OnRowsHandOff(const Connection::Ptr& conn, uint64_t id,
                           const RowsHandOffRequest& request) {
  std::string why = ChiefOnly(conn, "moves rows");
  if (why.empty() && !tables_) why = "this server holds no embedding tables";
  if (!why.empty()) return conn->Reply(id, ErrorReply{"hand-off of table rows: " + why});
  if (request.rank < 0) left_placement_ = true;
  tables_->HandOffRows(
      request.servers, request.rank,
      [reply = ReplyTo(conn, id)](StatusOr<TableHost::HandedRows> handed) {
        if (!handed.ok()) return reply(ErrorReply{handed.status().message()}, {});
        auto bytes = std::make_shared<std::string>(std::move(handed->bytes));
        reply(RowsHandOffReply{handed->rows, handed->step},
              Payload{reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(), bytes});
      });
}

void Server::OnRowsTakeOver(const Connection::Ptr& conn, uint64_t id,
                            const RowsTakeOverRequest& request, Buffer rows) {
  std::string why = ChiefOnly(conn, "moves rows");
  if (why.empty() && !tables_) why = "this server holds no embedding tables";
  // Servers below the new count keep their ranks (roles/worker/grow.h),
  // but for one that gave all its rows up, leaving the placement.
  if (why.empty() && request.rank != rank() && rank() < request.servers && !left_placement_)
    why = fmt::format("this server keeps rank {} in a job of {} servers, not {}", rank(),
                      request.servers, request.rank);
  if (!why.empty()) return conn->Reply(id, ErrorReply{"take-over of table rows: " + why});
  tables_->TakeOverRows(request.servers, request.rank, request.step, std::move(rows),
                        [this, reply = ReplyTo(conn, id), rank = request.rank](Status st) {
                          if (!st.ok()) return reply(ErrorReply{st.message()}, {});
                          // Its checkpoint shards are named by it from now on.
                          node_.cluster().AdoptRank(rank);
                          reply(Ack{}, {});
                        });
}

void Server::OnRowsDigest(const Connection::Ptr& conn, uint64_t id) {
  // A digest reads every row, on disk too: the chief's (tests) only.
  if (std::string why = ChiefOnly(conn, "moves rows"); !why.empty())
    return conn->Reply(id, ErrorReply{"digest of table rows: " + why});
  if (!tables_) return conn->Reply(id, RowsDigestReply{});
  tables_->Digest([reply = ReplyTo(conn, id)](StatusOr<RowsDigestReply> digest) {
    if (!digest.ok()) return reply(ErrorReply{digest.status().message()}, {});
    reply(std::move(*digest), {});
  });
}

}  // namespace pstrain
