// Scheduler step 11 (roles/scheduler/scheduler.h): a registration naming a connected
// node's id waits on a probe of that node.
#include <fmt/format.h>

#include <algorithm>

#include "roles/scheduler/scheduler.h"

namespace pstrain {

// 11. The holder answers (it lives: the newcomer is refused) or does not
// within the heartbeat timeout (it is lost, as a silent node would be, and
// the registration goes on). So a register request that names a live node's
// id, by mistake or by a stranger, cannot evict it, while a restarted node
// whose old connection lingers still gets its rank back.
void Scheduler::HoldForProbe(const Connection::Ptr& conn, uint64_t id, const RegisterRequest& req,
                             NodeEntry& holder, const Connection::Ptr& holder_conn) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  log_->info(
      "{} node id:{} registers from {} while the node holding that id ({}) is connected: "
      "asking the holder whether it is alive",
      RoleName(req.node.role), req.node.node_id, conn->peer(), Describe(holder));
  const uint64_t probe = next_probe_++;
  held_.push_back(HeldRegistration{conn, id, req, loop_.NowMs(), probe});
  const std::string who = fmt::format("{} rank {} at {}:{}", RoleName(holder.info.role),
                                      holder.info.rank, holder.info.host, holder.info.port);
  holder_conn->Call(Heartbeat{}, [this, probe, who](StatusOr<Incoming> reply) {
    auto it = std::find_if(held_.begin(), held_.end(),
                           [probe](const HeldRegistration& h) { return h.probe == probe; });
    if (it == held_.end()) return;
    HeldRegistration held = std::move(*it);
    held_.erase(it);
    auto newcomer = held.conn.lock();
    if (!newcomer || newcomer->closed()) return;
    if (reply.ok()) {
      const std::string why = fmt::format(
          "node id {} is held by a live node ({}), which answered a probe: a node id names one "
          "process; a restarted node gets its rank once the old process is gone",
          held.req.node.node_id, who);
      log_->warn("refused {} node id:{} from {}: {}", RoleName(held.req.node.role),
                 held.req.node.node_id, newcomer->peer(), why);
      return newcomer->Reply(held.request_id, ErrorReply{why});
    }
    // The holder's connection closed: OnClose has judged it; register anew.
    HandleRegister(newcomer, held.request_id, held.req);
  });
}

// Registrations whose holder has not answered within the heartbeat timeout:
// the holder is lost, and each registration goes on.
void Scheduler::ExpireProbes(uint64_t now, uint64_t timeout) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  std::vector<HeldRegistration> due;
  for (auto it = held_.begin(); it != held_.end();) {
    if (now - it->since_ms < timeout) {
      if (auto waiting = it->conn.lock()) waiting->Notify(Heartbeat{});  // it waits on us
      ++it;
      continue;
    }
    due.push_back(std::move(*it));
    it = held_.erase(it);
  }
  for (HeldRegistration& held : due) {
    auto newcomer = held.conn.lock();
    if (!newcomer || newcomer->closed()) continue;
    auto known = rank_of_.find(held.req.node.node_id);
    if (known != rank_of_.end()) {
      NodeEntry& holder = NodesOf(known->second.first)[known->second.second];
      if (auto old = holder.conn.lock(); old && old != newcomer && !old->closed() && !holder.lost)
        LoseNode(holder, fmt::format("it registered again with its node id from {}, and the old "
                                     "connection did not answer within {:.1f} s",
                                     newcomer->peer(), timeout / 1000.0));
    }
    if (finished_.IsSet() || shutting_down_) {
      newcomer->Reply(held.request_id, ErrorReply{"the job has ended"});
      continue;
    }
    HandleRegister(newcomer, held.request_id, held.req);
  }
}

}  // namespace pstrain
