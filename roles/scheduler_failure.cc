// Scheduler steps 4 and 5 (roles/scheduler.h): a node is lost when its
// connection closes or it falls silent; with recovery the job pauses for a
// replacement and resumes once every node is back.
#include <fmt/format.h>

#include "roles/scheduler.h"

namespace pstrain {

void Scheduler::OnClose(const Connection::Ptr& conn, const Status& reason) {
  auto it = node_of_.find(conn.get());
  if (it == node_of_.end()) return;
  auto [role, rank] = rank_of_.at(it->second);
  node_of_.erase(it);
  NodeEntry& node = NodesOf(role)[rank];
  if (shutting_down_) {
    node.shut_down = true;
    MaybeFinish();
    return;
  }
  if (paused_ && node.generation < generation_) {
    // 5. A node leaving to roll back, as Pause asked.
    log_->debug("{} left to roll back", Describe(node));
    return;
  }
  LoseNode(node, fmt::format("its connection closed ({})", reason.message()));
}

// 4. Silent nodes are lost; every node hears from the scheduler.
void Scheduler::CheckHeartbeats() {
  const uint64_t now = loop_.NowMs();
  const uint64_t timeout = Millis(options_.heartbeat_timeout_s);
  for (NodeEntry* n : AllNodes()) {
    auto conn = n->conn.lock();
    if (!conn || conn->closed()) continue;
    conn->Notify(Heartbeat{});
    if (shutting_down_ || n->generation != generation_ || now - n->last_heard_ms <= timeout)
      continue;
    std::string what =
        fmt::format("it has sent no heartbeat for {:.1f} s", (now - n->last_heard_ms) / 1000.0);
    return LoseNode(*n, what);
  }
  ExpireProbes(now, timeout);
  ExpireOverdueCalls(&loop_, 2 * timeout);
}

void Scheduler::LoseNode(NodeEntry& node, const std::string& why) {
  if (shutting_down_) return;
  log_->warn("lost {}: {}", Describe(node), why);
  node.lost = true;
  node.generation = -1;
  if (auto conn = node.conn.lock()) {
    node_of_.erase(conn.get());
    conn->Close(Aborted("the scheduler counts this node as lost"));
  }
  const std::string what =
      fmt::format("lost the {} rank {} (node id {}): {}", RoleName(node.info.role), node.info.rank,
                  node.info.node_id, why);
  if (!topology_sent_) return;  // before the job starts nothing is lost: wait for it
  if (recovery_wait_s_ <= 0 || !stop_reason_.empty())
    return AbortOnLoop(Aborted(fmt::format(
        "{}; the job cannot recover (recovery needs train.checkpoint, and train.recovery.wait_s "
        "above 0)",
        what)));
  if (!paused_) BeginPause(what);
}

// 5. Every other node drops its state and registers for the next generation.
void Scheduler::BeginPause(const std::string& why) {
  ++generation_;
  paused_ = true;
  for (auto& waiters : barriers_) {
    for (const BarrierWaiter& w : waiters)
      if (auto c = w.conn.lock()) c->Reply(w.request_id, ErrorReply{"the job is paused: " + why});
    waiters.clear();
  }
  for (NodeEntry* n : AllNodes()) {
    n->done = false;
    auto conn = n->conn.lock();
    if (!conn || conn->closed()) continue;
    conn->Call(Pause{why, generation_}, [](StatusOr<Incoming>) {});
  }
  log_->warn(
      "pausing the job (generation {}): waiting up to {} s for the lost node's replacement and "
      "every node to register again, then all resume from the newest complete checkpoint",
      generation_, recovery_wait_s_);
  register_timer_.RunOnce(Millis(recovery_wait_s_), [this, why] {
    if (!paused_) return;
    AbortOnLoop(
        DeadlineExceeded(fmt::format("{}; no replacement registered within {} s "
                                     "(train.recovery.wait_s): missing {}",
                                     why, recovery_wait_s_, MissingRanks())));
  });
}

void Scheduler::MaybeResume() {
  if (!paused_ || !AllRegistered()) return;
  paused_ = false;
  register_timer_.Stop();
  log_->info(
      "every node is back: the job resumes from its newest complete checkpoint "
      "(generation {})",
      generation_);
  SendTopology();
}

}  // namespace pstrain
