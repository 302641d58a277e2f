// Scheduler step 17 (roles/scheduler/scheduler.h): a lost server of a job
// with train.replication is replaced by its backup, live.
//
// Every dense partition a server holds has backup copies on the next live
// servers (roles/node/server_view.h), which hold every update a worker was
// told was taken (roles/server/replication.h). So a lost server needs no
// rollback: the first live server after it, its heir, holds all of it.
//   1. The scheduler drops the lost server from the live set, and every
//      server whose partitions it held goes to the heir (owners).
//   2. ServerView(view + 1, lost, live, owners) to every live server: the
//      heir makes its copies of the lost server's partitions its own, the
//      others drop copies they no longer back up, and each links to its
//      backups of the new view and sends them every partition's state.
//   3. Once every server took the view, the same to every worker: each
//      routes the lost server's partitions to the heir and sends again what
//      it had sent there unanswered (comm/ps/kv_client.h).
// Not promoted (the job then ends or rolls back as without replication):
// a job paused or elastic, or one whose last server is lost. A checkpoint
// stays as it would have been: the heir writes the lost rank's file
// (SaveRequest.origin), and a rollback starts every server afresh from it.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "roles/node/server_view.h"
#include "roles/scheduler/scheduler.h"

namespace pstrain {

bool Scheduler::PromoteBackups(NodeEntry& node, const std::string& what) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (replicas_ <= 0 || node.info.role != Role::kServer || paused_ || elastic_.enabled())
    return false;
  const int servers = Count(Role::kServer);
  if (server_view_.owners.empty())
    server_view_ = ServerView{0, -1, AllServers(servers), AllServers(servers)};
  const int lost = node.info.rank;
  std::vector<int> live;
  for (int r : server_view_.live)
    if (r != lost) live.push_back(r);
  const int heir = HeirOf(lost, live);
  if (heir < 0) {
    log_->error("{}: no server is left to hold its partitions", what);
    return false;
  }
  // What it held (its own rank's rows and partitions, and those it took
  // over) has whole copies only once its backups of this view hold them.
  std::string held;
  for (size_t o = 0; o < server_view_.owners.size(); ++o)
    if (server_view_.owners[o] == lost) held += fmt::format("{}{}", held.empty() ? "" : ", ", o);
  if (!held.empty() && node.held_view < server_view_.view) {
    log_->error(
        "lost server {} before its backups held all it holds (view {}, they hold view {}'s): the "
        "partitions and table rows placed on server {} have no whole copy",
        lost, server_view_.view, node.held_view, held);
    return false;
  }
  ServerView view{server_view_.view + 1, lost, live, server_view_.owners};
  for (int& owner : view.owners)
    if (owner == lost) owner = heir;
  server_view_ = view;
  log_->warn("lost server {}: server {} holds its partitions now (view {}): no step is redone",
             lost, heir, view.view);
  if (static_cast<int>(live.size()) <= replicas_)
    log_->warn(
        "replication: {} servers are live, so each partition has {} backups of the {} "
        "train.replication.replicas asks for",
        live.size(), live.size() - 1, replicas_);
  SendServerView(view);
  return true;
}

void Scheduler::JoinAsBackup(const Connection::Ptr& conn, uint64_t id, NodeInfo info,
                             const RegisterRequest& req) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  admitting_live_ = true;
  Admit(conn, id, info, "joins the running job as a backup, takes", req);
  admitting_live_ = false;
  // The topology with its entry went out (Admit): the view that follows
  // reaches every node after it, on the same connection.
  ServerView view = server_view_;
  ++view.view;
  view.lost = -1;
  view.live.insert(std::upper_bound(view.live.begin(), view.live.end(), info.rank), info.rank);
  server_view_ = view;
  log_->info("server {} joins as a backup (view {}): {} servers are live", info.rank, view.view,
             view.live.size());
  SendServerView(view);
}

void Scheduler::NoteReplicasHeld(NodeEntry& node, int64_t view) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  node.held_view = view;
  if (view != server_view_.view || view == 0) return;
  for (int r : server_view_.live)
    if (servers_[static_cast<size_t>(r)].held_view < view) return;
  log_->info("replication: the backups of every live server hold all it holds (view {})", view);
}

void Scheduler::SendServerView(const ServerView& view) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  // The workers' turn, once every live server answered (or is gone).
  auto to_workers = [this, view] {
    if (view.view != server_view_.view) return;  // a newer view went out meanwhile
    for (NodeEntry& w : workers_)
      if (auto conn = w.conn.lock(); conn && !conn->closed())
        conn->Call(view, [this, rank = w.info.rank](StatusOr<Incoming> answer) {
          if (!answer.ok())
            log_->warn("worker {} did not take the server view: {}", rank,
                       answer.status().message());
        });
  };
  auto left = std::make_shared<size_t>(1);  // and this call's own share
  auto answered = [left, to_workers] {
    if (--*left == 0) to_workers();
  };
  for (int r : view.live) {
    NodeEntry& s = servers_[static_cast<size_t>(r)];
    auto conn = s.conn.lock();
    if (!conn || conn->closed()) continue;
    ++*left;
    conn->Call(view, [this, r, answered](StatusOr<Incoming> answer) {
      if (!answer.ok())
        log_->warn("server {} did not take the server view: {}", r, answer.status().message());
      answered();
    });
  }
  answered();
}

}  // namespace pstrain
