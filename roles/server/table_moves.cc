// Live moves of table rows (roles/server/table_moves.h): the table host's
// side, on its thread, and the server's requests, on the loop.
#include "roles/server/table_moves.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

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

// What a server giving rows up knows of each row it copied ahead.
enum CopiedRow : uint8_t { kChanged = 0, kClean = 1, kTaken = 2 };

// Leaves in `m` only the rows `copied` does not hold clean (copied ahead
// and not touched since), and lists as gone every copied id not among the
// rows taken: a row evicted, touched or not, must not come back from its
// copy.
int64_t KeepChanged(FlatIdMap<uint8_t>& copied, MovedRows* m) {
  RowBatch changed(m->rows.floats);
  int64_t unchanged = 0;
  for (size_t i = 0; i < m->rows.size(); ++i) {
    uint8_t* state = copied.Find(m->rows.ids[i]);
    const bool clean = state != nullptr && *state == kClean;
    if (state != nullptr) *state = kTaken;
    if (clean) {
      ++unchanged;
    } else {
      changed.Add(m->rows.ids[i], m->rows.row(i), m->rows.last_touched[i], m->rows.updates[i]);
    }
  }
  copied.ForEach([&](int64_t id, uint8_t& state) {
    if (state != kTaken) m->gone.push_back(id);
  });
  m->rows = std::move(changed);
  return unchanged;
}

// The rows a placement over `servers` puts elsewhere than on `rank` (-1:
// every row).
std::function<bool(int64_t)> PlacedElsewhere(int servers, int rank) {
  return [servers, rank](int64_t id) { return rank < 0 || ServerOfId(id, servers) != rank; };
}

int64_t RowCount(const std::vector<MovedRows>& moved) {
  int64_t rows = 0;
  for (const MovedRows& m : moved) rows += static_cast<int64_t>(m.rows.size());
  return rows;
}

}  // namespace

MovedRows TableHost::Moving(const std::string& name, const ServerRows& table, RowBatch rows) {
  const auto dim = static_cast<uint32_t>(table.options().dim);
  const auto slots = static_cast<uint32_t>(rows.floats / dim) - 1;
  return MovedRows{name, dim, slots, table.table_updates(), std::move(rows), {}};
}

void TableHost::Touched(HostedTable& t, const int64_t* ids, size_t n) {
  if (!t.copied_ahead) return;
  for (size_t i = 0; i < n; ++i)
    if (uint8_t* state = t.copied_ahead->Find(ids[i])) *state = kChanged;
}

void TableHost::DropCopies() {
  rows_given_ahead_.reset();
  rows_taken_ahead_.reset();
  for (auto& [name, t] : tables_)
    if (t) t->copied_ahead.reset();
}

TableHost::HandedRows TableHost::CopyRowsAhead(int servers, int rank) {
  std::vector<MovedRows> copied;
  HandedRows out;
  const auto elsewhere = PlacedElsewhere(servers, rank);
  for (auto& [name, t] : tables_) {
    t->copied_ahead.reset();
    std::optional<RowBatch> rows = t->table.CopyRows(elsewhere);
    if (!rows) continue;  // on disk too: it moves whole at the change
    auto clean = std::make_unique<FlatIdMap<uint8_t>>();
    clean->Reserve(rows->size());
    for (int64_t id : rows->ids) clean->Insert(id, kClean);
    t->copied_ahead = std::move(clean);
    out.step = std::max(out.step, t->core.step());
    copied.push_back(Moving(name, t->table, std::move(*rows)));
  }
  out.rows = RowCount(copied);
  EncodeMovedRows(copied, &out.bytes);
  rows_given_ahead_ = CopiedAhead{servers, rank, {}, {}};
  return out;
}

StatusOr<TableHost::HandedRows> TableHost::HandOffDelta(int servers, int rank, RowsPhase phase) {
  if (phase == RowsPhase::kDelta && (!rows_given_ahead_ || rows_given_ahead_->servers != servers ||
                                     rows_given_ahead_->rank != rank))
    return FailedPrecondition(
        fmt::format("the rows this server gives up to rank {} of {} servers were not copied ahead",
                    rank, servers));
  std::vector<MovedRows> taken;
  HandedRows out;
  const auto elsewhere = PlacedElsewhere(servers, rank);
  for (auto& [name, t] : tables_) {
    auto rows = t->table.TakeRows(elsewhere);
    if (!rows.ok()) {
      // Rows already taken go back where they were; should the disk fail
      // that too, the move fails and the job recovers from its newest
      // checkpoint (elastic jobs have one).
      for (MovedRows& m : taken)
        if (Status back = tables_[m.table]->table.PutRows(m.rows); !back.ok())
          log_->error("rows of table '{}' not put back: {}", m.table, back.message());
      return rows.status().WithContext(fmt::format("handing off rows of table '{}'", name));
    }
    out.step = std::max(out.step, t->core.step());
    taken.push_back(Moving(name, t->table, std::move(*rows)));
  }
  int64_t unchanged = 0, gone = 0;
  for (MovedRows& m : taken) {
    HostedTable& t = *tables_[m.table];
    if (phase == RowsPhase::kDelta && t.copied_ahead) {
      unchanged += KeepChanged(*t.copied_ahead, &m);
      gone += static_cast<int64_t>(m.gone.size());
    }
    t.copied_ahead.reset();
  }
  out.rows = RowCount(taken);
  rows_given_ahead_.reset();
  EncodeMovedRows(taken, &out.bytes);
  servers_ = servers;
  if (phase == RowsPhase::kDelta)
    log_->info("of the table rows copied ahead, {} were unchanged and {} are gone", unchanged,
               gone);
  return out;
}

void TableHost::HandOffRows(int servers, int rank, RowsPhase phase,
                            std::function<void(StatusOr<HandedRows>)> done) {
  thread_.Post([this, servers, rank, phase, done] {
    const auto begin = std::chrono::steady_clock::now();
    if (phase == RowsPhase::kCopy) {
      HandedRows copied = CopyRowsAhead(servers, rank);
      log_->info(
          "copied {} table rows ({} bytes) ahead in {:.0f} ms for a placement over {} servers; "
          "the rows pulled or pushed from now on move again at the change",
          copied.rows, copied.bytes.size(), MsSince(begin), servers);
      return done(std::move(copied));
    }
    auto handed = HandOffDelta(servers, rank, phase);
    if (!handed.ok()) return done(handed.status());
    log_->info(
        "handed off {} table rows ({} bytes) in {:.0f} ms: rows are placed over {} servers from "
        "now on",
        handed->rows, handed->bytes.size(), MsSince(begin), servers);
    done(std::move(*handed));
  });
}

StatusOr<std::vector<MovedRows>> TableHost::WithRowsAside(int servers, int rank,
                                                          std::vector<MovedRows> delta) {
  if (!rows_taken_ahead_ || rows_taken_ahead_->servers != servers ||
      rows_taken_ahead_->rank != rank)
    return FailedPrecondition(
        fmt::format("no rows copied ahead are held here for rank {} of {} servers", rank, servers));
  std::vector<MovedRows> aside = std::move(rows_taken_ahead_->aside);
  const bool installed = !rows_taken_ahead_->installed.empty();
  rows_taken_ahead_.reset();
  for (const MovedRows& a : aside)
    if (std::none_of(delta.begin(), delta.end(),
                     [&](const MovedRows& m) { return m.table == a.table; }))
      return InvalidArgument(
          fmt::format("no delta came for the rows of table '{}' copied ahead", a.table));
  for (MovedRows& m : delta) {
    auto it = std::find_if(aside.begin(), aside.end(),
                           [&](const MovedRows& a) { return a.table == m.table; });
    if (it == aside.end()) continue;
    if (it->rows.floats != m.rows.floats)
      return InvalidArgument(fmt::format("rows of table '{}' copied ahead have {} floats, not {}",
                                         m.table, it->rows.floats, m.rows.floats));
    // What came again, or is gone, replaces or drops its copy.
    if (installed) {
      std::vector<int64_t> stale = m.gone;
      stale.insert(stale.end(), m.rows.ids.begin(), m.rows.ids.end());
      PSTRAIN_RETURN_IF_ERROR(Find(m.table)->table.RemoveRows(stale));
      continue;
    }
    FlatIdMap<uint8_t> stale;
    stale.Reserve(m.rows.size() + m.gone.size());
    for (int64_t id : m.rows.ids) stale.Insert(id, 1);
    for (int64_t id : m.gone) stale.Insert(id, 1);
    for (size_t i = 0; i < it->rows.size(); ++i)
      if (!stale.Find(it->rows.ids[i]))
        m.rows.Add(it->rows.ids[i], it->rows.row(i), it->rows.last_touched[i], it->rows.updates[i]);
  }
  return delta;
}

Status TableHost::KeepCopyAhead(int servers, int rank, std::vector<MovedRows> moved) {
  PSTRAIN_RETURN_IF_ERROR(RemoveInstalledCopy());
  rows_taken_ahead_ = CopiedAhead{servers, rank, {}, {}};
  // Rows placed over `servers` already: no request placed over today's
  // count reaches these tables, nor a checkpoint (the chief asks the
  // servers it routes to).
  // A table with max_rows evicts as it fills: installed in two parts its
  // rows could differ from one whole move's.
  bool early = servers_ == servers && rank_ == rank;
  for (const MovedRows& m : moved) early = early && Find(m.table)->table.options().max_rows == 0;
  if (early) {
    for (const MovedRows& m : moved)
      PSTRAIN_RETURN_IF_ERROR(Find(m.table)->table.CheckNewRows(m.rows));
    for (MovedRows& m : moved) {
      // Only the disk can fail here; what was installed goes with the copy
      // at the change, or the job rolls back.
      rows_taken_ahead_->installed[m.table] = m.rows.ids;
      PSTRAIN_RETURN_IF_ERROR(Find(m.table)->table.PutCheckedRows(m.rows));
      m.rows = RowBatch(m.rows.floats);
    }
  }
  rows_taken_ahead_->aside = std::move(moved);
  return Status::OK();
}

Status TableHost::RemoveInstalledCopy() {
  if (!rows_taken_ahead_) return Status::OK();
  for (const auto& [table, ids] : rows_taken_ahead_->installed)
    PSTRAIN_RETURN_IF_ERROR(Find(table)->table.RemoveRows(ids));
  rows_taken_ahead_->installed.clear();
  return Status::OK();
}

Status TableHost::CheckRowsFit(int servers, int rank, const std::vector<MovedRows>& moved) {
  for (const MovedRows& m : moved) {
    HostedTable* t = Find(m.table);
    if (t == nullptr) return InvalidArgument(fmt::format("rows of unknown table '{}'", m.table));
    if (static_cast<int>(m.dim) != t->table.options().dim)
      return InvalidArgument(fmt::format("rows of table '{}' have dim {}, not {}", m.table, m.dim,
                                         t->table.options().dim));
    for (const std::vector<int64_t>* ids : {&m.rows.ids, &m.gone})
      for (int64_t id : *ids)
        if (ServerOfId(id, servers) != rank)
          return InvalidArgument(
              fmt::format("row {} of table '{}' belongs to server {} of {}, not to this one ({})",
                          id, m.table, ServerOfId(id, servers), servers, rank));
  }
  return Status::OK();
}

Status TableHost::InstallRows(int servers, int rank, int64_t step, std::vector<MovedRows> moved) {
  // Everything is checked before anything is installed (CheckRowsFit came
  // first, on these rows or on the copy and the delta they were made of).
  for (const MovedRows& m : moved) {
    // Rows it has, ids twice, another row width: refused before any is in.
    if (Status st = Find(m.table)->table.CheckNewRows(m.rows); !st.ok()) return st;
  }
  // A server that joined live starts its tables at the job's step, and
  // their lr schedules where their rows' were; so does one that gave its
  // rows away earlier and takes some back (its tables stopped then).
  for (const MovedRows& m : moved)
    if (HostedTable* t = Find(m.table); t->core.step() < step)
      t->table.CatchUpSchedule(m.table_updates);
  for (auto& [name, t] : tables_)
    if (t->core.step() < step) t->core.RestoreStep(step);
  for (const MovedRows& m : moved) {
    // Only the disk can fail here; the move then fails, and the job
    // recovers from its newest checkpoint (elastic jobs have one).
    Status st = Find(m.table)->table.PutCheckedRows(m.rows);
    if (!st.ok()) return st.WithContext(fmt::format("taking over rows of '{}'", m.table));
  }
  servers_ = servers;
  rank_ = rank;
  return Status::OK();
}

void TableHost::TakeOverRows(int servers, int rank, int64_t step, RowsPhase phase, Buffer bytes,
                             std::function<void(Status)> done) {
  thread_.Post([this, servers, rank, step, phase, bytes = std::move(bytes), done] {
    const auto begin = std::chrono::steady_clock::now();
    auto moved = DecodeMovedRows(bytes.data, bytes.size);
    if (!moved.ok()) return done(moved.status().WithContext("rows taken over"));
    // Checked before anything changes: a delta's gone ids, too, and only
    // a delta has any.
    if (Status st = CheckRowsFit(servers, rank, *moved); !st.ok())
      return done(st.WithContext("rows taken over"));
    for (const MovedRows& m : *moved)
      if (!m.gone.empty() && phase != RowsPhase::kDelta)
        return done(InvalidArgument(
            fmt::format("rows taken over: gone ids of table '{}' outside a delta", m.table)));
    if (phase == RowsPhase::kCopy) {
      const int64_t rows = RowCount(*moved);
      if (Status st = KeepCopyAhead(servers, rank, std::move(*moved)); !st.ok())
        return done(st.WithContext("rows copied ahead"));
      log_->info("{} {} table rows copied ahead for rank {} of {} servers in {:.0f} ms",
                 rows_taken_ahead_->installed.empty() ? "holds" : "installed", rows, rank, servers,
                 MsSince(begin));
      return done(Status::OK());
    }
    if (phase == RowsPhase::kDelta) {
      moved = WithRowsAside(servers, rank, std::move(*moved));
      if (!moved.ok()) return done(moved.status().WithContext("rows taken over"));
    } else if (Status st = RemoveInstalledCopy(); !st.ok()) {
      return done(st.WithContext("rows taken over"));
    }
    rows_taken_ahead_.reset();
    const int64_t rows = RowCount(*moved);
    if (Status st = InstallRows(servers, rank, step, std::move(*moved)); !st.ok())
      return done(st.WithContext("rows taken over"));
    log_->info("took over {} table rows in {:.0f} ms: rows are placed over {} servers from now on",
               rows, MsSince(begin), servers);
    done(Status::OK());
  });
}

void TableHost::Digests(std::function<void(StatusOr<NamedDigests>)> done) {
  thread_.Post([this, done] {
    NamedDigests out;
    for (auto& [name, t] : tables_) {
      auto digest = t->table.Digest();
      if (!digest.ok()) return done(digest.status().WithContext("table " + name));
      out.emplace_back(name, *digest);
    }
    done(std::move(out));
  });
}

void TableHost::Digest(std::function<void(StatusOr<RowsDigestReply>)> done) {
  Digests([done](StatusOr<NamedDigests> digests) {
    if (!digests.ok()) return done(digests.status());
    RowsDigestReply out;
    for (const auto& [name, digest] : *digests) {
      out.tables.push_back(name);
      out.rows.push_back(digest.rows);
      out.sums.push_back(digest.sum);
    }
    done(std::move(out));
  });
}

void Server::OnRowsHandOff(const Connection::Ptr& conn, uint64_t id,
                           const RowsHandOffRequest& request) {
  std::string why = ChiefOnly(conn, "moves rows");
  if (why.empty() && !tables_) why = "this server holds no embedding tables";
  if (!why.empty()) return conn->Reply(id, ErrorReply{"hand-off of table rows: " + why});
  if (request.rank < 0 && request.phase != RowsPhase::kCopy) left_placement_ = true;
  tables_->HandOffRows(
      request.servers, request.rank, request.phase,
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
  tables_->TakeOverRows(request.servers, request.rank, request.step, request.phase, std::move(rows),
                        [this, reply = ReplyTo(conn, id), rank = request.rank,
                         ahead = request.phase == RowsPhase::kCopy](Status st) {
                          if (!st.ok()) return reply(ErrorReply{st.message()}, {});
                          if (ahead) return reply(Ack{}, {});  // nothing changes yet
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
