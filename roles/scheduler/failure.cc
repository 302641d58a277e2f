// Scheduler steps 4 and 5 (roles/scheduler/scheduler.h): a node is lost when its
// connection closes or it falls silent; with recovery the job pauses for a
// replacement and resumes once every node is back.
#include <fmt/format.h>

#include <utility>

#include "roles/scheduler/scheduler.h"

namespace pstrain {

void Scheduler::OnClose(const Connection::Ptr& conn, const Status& reason) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  auto it = node_of_.find(conn.get());
  if (it == node_of_.end()) return;
  auto [role, rank] = rank_of_.at(it->second);
  node_of_.erase(it);
  NodeEntry& node = NodesOf(role)[rank];
  if (shutting_down_) {
    // 4. One that gave this scheduler up while it stalled rejoins to hear
    // the end (RejoinAtShutdown), within the shutdown's wait.
    if (ending_ && !node.shut_down && loop_.NowMs() < rejoin_grace_until_ms_) {
      node.awaiting_rejoin = true;
      return;
    }
    node.shut_down = true;
    MaybeFinish();
    return;
  }
  if (paused_ && node.generation < generation_) {
    // 5. A node leaving to roll back, as Pause asked.
    log_->debug("{} left to roll back", Describe(node));
    return;
  }
  if (loop_.NowMs() < rejoin_grace_until_ms_ && topology_sent_) {
    // 4. It gave up on this scheduler while it was stalled: it rejoins (9).
    const double timeout_s = options_.heartbeat_timeout_s;
    log_->warn(
        "{} closed its connection while the scheduler was stalled ({}): it has {:.1f} s to "
        "rejoin",
        Describe(node), reason.message(), timeout_s);
    node.awaiting_rejoin = true;
    node.last_heard_ms = loop_.NowMs();
    return;
  }
  LoseNode(node, fmt::format("its connection closed ({})", reason.message()));
}

// 4. A stalled scheduler does not judge the nodes (roles/node/stall_watch.h).
bool Scheduler::NoticeStall(uint64_t now, uint64_t timeout) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const uint64_t late = stall_watch_.Check(now, Millis(options_.heartbeat_interval_s), timeout);
  if (late == 0) return false;
  log_->warn(
      "the scheduler was stalled for {:.1f} s (a stopped process, a paused machine or a starved "
      "CPU): every node gets a fresh heartbeat timeout instead of being judged on it",
      late / 1000.0);
  for (NodeEntry* n : AllNodes()) n->last_heard_ms = now;
  rejoin_grace_until_ms_ = now + timeout;
  return true;
}

// 4. Silent nodes are lost; every node hears from the scheduler.
void Scheduler::CheckHeartbeats() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const uint64_t now = loop_.NowMs();
  const uint64_t timeout = Millis(options_.heartbeat_timeout_s);
  const bool stalled = NoticeStall(now, timeout);
  for (NodeEntry* n : AllNodes()) {
    auto conn = n->conn.lock();
    if (!conn || conn->closed()) {
      if (n->awaiting_rejoin && !shutting_down_ && now - n->last_heard_ms > timeout)
        return LoseNode(*n, fmt::format("it closed its connection while the scheduler was "
                                        "stalled and has not rejoined within {:.1f} s",
                                        timeout / 1000.0));
      continue;
    }
    conn->Notify(Heartbeat{});
    if (stalled || shutting_down_ || n->generation != generation_ ||
        now - n->last_heard_ms <= timeout)
      continue;
    std::string what =
        fmt::format("it has sent no heartbeat for {:.1f} s", (now - n->last_heard_ms) / 1000.0);
    return LoseNode(*n, what);
  }
  if (stalled) return;  // the answers that came meanwhile are read after this
  ExpireProbes(now, timeout);
  ExpireOverdueCalls(&loop_, 2 * timeout);
  MaybeReshape();  // 13. a change whose question went unanswered is asked again
}

void Scheduler::LoseNode(NodeEntry& node, const std::string& why) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (shutting_down_) return;
  log_->warn("lost {}: {}", Describe(node), why);
  node.lost = true;
  node.awaiting_rejoin = false;
  failed_link_.clear();  // a rollback for a lost node breaks a row of link failures
  if (HeldNow(node)) --held_now_;
  node.generation = -1;
  if (auto conn = node.conn.lock()) {
    node_of_.erase(conn.get());
    conn->Close(Aborted("the scheduler counts this node as lost"));
  }
  const std::string what =
      fmt::format("lost the {} rank {} (node id {}): {}", RoleName(node.info.role), node.info.rank,
                  node.info.node_id, why);
  if (!topology_sent_) return;             // before the job starts nothing is lost: wait for it
  if (PromoteBackups(node, what)) return;  // 17. replication needs no checkpoint
  if (recovery_wait_s_ <= 0 || !stop_reason_.empty())
    return AbortOnLoop(Aborted(fmt::format(
        "{}; the job cannot recover (recovery needs train.checkpoint, and train.recovery.wait_s "
        "above 0)",
        what)));
  if (FinishWithoutLost(node, what)) return;
  // 13. Also during a pause: a peer may have reported the loss first.
  if (elastic_.enabled() && DropLost(node, what)) return;
  if (!paused_) BeginPause(what);
}

// 5. Every other node drops its state and registers for the next generation.
void Scheduler::BeginPause(const std::string& why, bool reshape) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (!live_lost_.empty()) {  // 15. its ranks changed: every node learns its own
    ForgetLiveLoss(why);
    reshape = true;
  }
  SetGeneration(generation_ + 1);
  paused_ = true;
  server_view_ = ServerView{};  // 17. every server starts again from the checkpoint
  for (NodeEntry& s : servers_) s.held_view = -1;  // and sends its backups its states again
  // 13. A change of shape under way waits for the next: its joiners and
  // leavers are kept.
  reshaping_ = false;
  RequeueLiveJoiners();  // 16. a live change of workers under way waits too
  // A stop on request that waited for that change ends the paused job.
  const std::string stop_asked = std::exchange(stop_after_change_, std::string());
  best_step_at_rollback_ = best_step_;
  for (Barrier& barrier : barriers_) {
    for (const BarrierWaiter& w : barrier.waiters)
      if (auto c = w.conn.lock()) c->Reply(w.request_id, ErrorReply{"the job is paused: " + why});
    barrier.waiters.clear();
    barrier.slot_of.clear();
  }
  for (NodeEntry* n : AllNodes()) {
    n->done = false;
    auto conn = n->conn.lock();
    if (!conn || conn->closed()) continue;
    Pause pause{why, generation_};
    if (reshape) {
      pause.rank = n->info.rank;
      pause.server_num = Count(Role::kServer);
      pause.worker_num = Count(Role::kWorker);
    }
    conn->Call(pause, [](StatusOr<Incoming>) {});
  }
  if (reshape) {
    log_->info(
        "pausing the job (generation {}) for its change of shape: every node registers again "
        "within {} s, then all resume from the newest complete checkpoint",
        generation_, recovery_wait_s_);
  } else {
    log_->warn(
        "pausing the job (generation {}): waiting up to {} s for the lost node's replacement and "
        "every node to register again, then all resume from the newest complete checkpoint",
        generation_, recovery_wait_s_);
  }
  register_timer_.RunOnce(Millis(recovery_wait_s_), [this, why] {
    if (!paused_) return;
    AbortOnLoop(
        DeadlineExceeded(fmt::format("{}; no replacement registered within {} s "
                                     "(train.recovery.wait_s): missing {}",
                                     why, recovery_wait_s_, MissingRanks())));
  });
  if (!stop_asked.empty()) BeginStop(stop_asked);
}

// 5. Each rollback for a link is counted; one where some worker got past
// the furthest step of all before it (progress) starts the count again.
// Trying again helps with a link that broke once; a link that fails again
// and again with no progress (a firewall rule, a cut cable, a route gone)
// would roll the job back for as long as it lasts.
bool Scheduler::GiveUpOnLink(const NodeEntry& reporter, const NodeFailed& failed,
                             const std::string& what) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const auto& peers = failed.peer_role == Role::kServer ? servers_ : workers_;
  if (failed.peer_rank < 0 || failed.peer_rank >= static_cast<int>(peers.size()) ||
      failed.peer_role == Role::kScheduler) {
    failed_link_.clear();
    return false;
  }
  // "worker 1 and server 0" whichever end reports: workers first, then ranks.
  std::pair<Role, int> a{reporter.info.role, reporter.info.rank};
  std::pair<Role, int> b{failed.peer_role, failed.peer_rank};
  auto order = [](const std::pair<Role, int>& n) {
    return std::make_pair(n.first == Role::kWorker ? 0 : 1, n.second);
  };
  if (order(b) < order(a)) std::swap(a, b);
  const std::string link =
      fmt::format("{} {} and {} {}", RoleName(a.first), a.second, RoleName(b.first), b.second);
  const bool progressed = best_step_ > best_step_at_rollback_;
  failed_link_rollbacks_ = link == failed_link_ && !progressed ? failed_link_rollbacks_ + 1 : 0;
  failed_link_ = link;
  const int limit = options_.max_failed_link_rollbacks;
  if (failed_link_rollbacks_ < limit) return false;
  AbortOnLoop(Aborted(fmt::format(
      "{} could not reach each other in {} rollbacks in a row with no progress "
      "(train.recovery.max_failed_link_rollbacks: {}); check the network between them: {}",
      link, failed_link_rollbacks_, limit, what)));
  return true;
}

void Scheduler::RejoinAtShutdown(const Connection::Ptr& conn, uint64_t id,
                                 const RegisterRequest& req) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  auto known = rank_of_.find(req.node.node_id);
  if (known == rank_of_.end() || known->second.first != req.node.role || finished_.IsSet())
    return conn->Reply(id, ErrorReply{"the job is shutting down"});
  NodeEntry& node = NodesOf(known->second.first)[known->second.second];
  node.conn = conn;
  node.awaiting_rejoin = false;
  node.last_heard_ms = loop_.NowMs();
  node_of_[conn.get()] = req.node.node_id;
  log_->info("{} rejoined as the job ends: telling it so", Describe(node));
  conn->Reply(id, RegisterReply{node.info.rank, generation_});
  const std::string node_id = req.node.node_id;
  conn->Call(*ending_, [this, node_id](StatusOr<Incoming>) {
    auto it = rank_of_.find(node_id);
    if (it != rank_of_.end()) NodesOf(it->second.first)[it->second.second].shut_down = true;
    MaybeFinish();
  });
}

void Scheduler::MaybeResume() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (!paused_ || !AllRegistered()) return;
  paused_ = false;
  register_timer_.Stop();
  log_->info(
      "every node is back: the job resumes from its newest complete checkpoint "
      "(generation {})",
      generation_);
  SendTopology();
  MaybeReshape();  // 13. joins and leaves asked for meanwhile
}

}  // namespace pstrain
