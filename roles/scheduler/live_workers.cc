// Scheduler step 16 (roles/scheduler/scheduler.h): workers join and leave an
// elastic job live. The job (sync, async or ssp, on the CPU, nothing
// compressed, its data split by index: ElasticBounds::live_workers) changes
// its workers at a step S every worker reaches, without a checkpoint and
// without any node starting again:
//   1. The workers are held and told S, the new worker count and, for each
//      rank today, its rank after S (Stop with workers and ranks; the nodes
//      that stay keep their order, the joiners come after them).
//   2. At S every worker enters a barrier of today's workers; the chief then
//      says so (ShapeChanged with workers). Nothing is in flight: every
//      server has applied step S - 1.
//   3. Each server renumbers its workers from S (ChangeWorkers; roles/server/
//      update_core.h, Renumber): a sync step waits for the new set.
//   4. The scheduler renumbers its workers, admits the joiners (RegisterReply
//      live), sends the leavers off and every worker the new topology, then
//      answers the chief.
//   5. The workers (roles/worker/trainer_workers.cc) rebuild the ring, the
//      chief hands its weights and its place in the data to the joiners, and
//      every worker splits the rest of the epoch anew.
// Anything failing on the way pauses the job: every node goes back to the
// newest checkpoint, as a lost node does.
#include <fmt/format.h>

#include <memory>

#include "comm/transport/completion.h"
#include "roles/scheduler/scheduler.h"

namespace pstrain {

// Servers joining or leaving meanwhile wait for the next change, which
// takes them live too where it can (CanGrowLive, CanShrinkLive).
bool Scheduler::CanChangeWorkersLive() const {
  if (!elastic_.live_workers || !live_lost_.empty()) return false;
  if (Joining(Role::kWorker) == 0 && Leaving(Role::kWorker) == 0) return false;
  for (const NodeEntry& w : workers_)
    if (w.info.node_id.empty()) return false;
  return true;
}

std::string Scheduler::PlanLiveWorkers(std::set<std::string> leavers, std::vector<Joiner> joining) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  std::vector<std::string> who;
  live_ranks_.assign(workers_.size(), -1);
  int next = 0;
  for (size_t r = 0; r < workers_.size(); ++r) {
    const std::string& node_id = workers_[r].info.node_id;
    if (leavers.count(node_id)) {
      who.push_back(fmt::format("worker node id:{} leaves ({})", node_id, leaving_[node_id]));
      continue;
    }
    if (next != static_cast<int>(r))
      who.push_back(fmt::format("worker node id:{} takes rank {}", node_id, next));
    live_ranks_[r] = next++;
  }
  for (Joiner& j : joining) {
    j.info.rank = next++;
    who.push_back(fmt::format("worker node id:{} joins as rank {}", j.info.node_id, j.info.rank));
  }
  live_joiners_ = std::move(joining);
  live_worker_leavers_ = std::move(leavers);
  live_workers_ = next;
  return fmt::format("{}", fmt::join(who, "; "));
}

void Scheduler::LogLiveWorkers(int old_workers, int64_t step, const std::string& who) {
  const std::string line = fmt::format(
      "elastic: workers {} -> {}, servers {} -> {} from step {}: {} (live: no checkpoint, no node "
      "starts again)",
      old_workers, live_workers_, Count(Role::kServer), Count(Role::kServer), step, who);
  log_->info("{}", line);
  RecordChange(line);
}

void Scheduler::ChangeWorkersLive() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  std::set<std::string> leavers;
  for (const NodeEntry& w : workers_)
    if (leaving_.count(w.info.node_id)) leavers.insert(w.info.node_id);
  // Joiners that come meanwhile, and servers, wait for the next change.
  std::vector<Joiner> joining;
  for (auto it = joiners_.begin(); it != joiners_.end();) {
    if (it->info.role != Role::kWorker) {
      ++it;
      continue;
    }
    joining.push_back(std::move(*it));
    it = joiners_.erase(it);
  }
  const int old_workers = Count(Role::kWorker);
  const std::string why = PlanLiveWorkers(std::move(leavers), std::move(joining));
  reshape_reasons_.clear();
  HoldForChange(
      "changing the job's workers live", why,
      [this, why, old_workers, ranks = live_ranks_](int64_t furthest) {
        LogLiveWorkers(old_workers, furthest, why);
        const Stop stop{
            "the job's workers change: " + why, furthest, 0, {}, {}, live_workers_, ranks};
        for (NodeEntry& w : workers_)
          if (auto conn = w.conn.lock()) conn->Call(stop, [](StatusOr<Incoming>) {});
      });
}

void Scheduler::RequeueLiveJoiners() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (live_joiners_.empty() && live_ranks_.empty()) return;
  for (Joiner& j : live_joiners_) joiners_.push_back(std::move(j));
  live_joiners_.clear();
  live_worker_leavers_.clear();
  live_ranks_.clear();
  live_workers_ = 0;
}

// 2-4: the chief's word that every worker is at the change's step.
void Scheduler::FinishWorkersLive(const Connection::Ptr& conn, uint64_t id,
                                  const ShapeChanged& changed) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (!reshaping_ || changed.step != reshape_step_ || live_ranks_.empty() ||
      changed.workers != live_workers_)
    return conn->Reply(id, ErrorReply{fmt::format("no live change to {} workers at step {} is "
                                                  "under way",
                                                  changed.workers, changed.step)});
  const int64_t step = changed.step;
  CallServers(
      ChangeWorkers{step, live_workers_, live_ranks_}, [this, conn, id, step](const Status& st) {
        if (!reshaping_ || reshape_step_ != step) {  // a pause came first
          if (!conn->closed()) conn->Reply(id, ErrorReply{"the job was paused"});
          return;
        }
        std::string failed = st.ok() ? "" : st.message();
        for (const Joiner& j : live_joiners_)
          if (auto c = j.conn.lock(); (!c || c->closed()) && failed.empty())
            failed = fmt::format("worker node id:{} went away before it joined", j.info.node_id);
        if (!failed.empty()) {
          if (!conn->closed()) conn->Reply(id, ErrorReply{failed});
          return BeginPause("changing the workers live: " + failed);
        }
        ApplyWorkersLive(step);
        if (!conn->closed()) conn->Reply(id, Ack{});
        if (!stop_after_change_.empty()) return StopIfAsked();
        MaybeReshape();  // changes asked for meanwhile
      });
}

void Scheduler::ApplyWorkersLive(int64_t step) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  reshaping_ = false;
  const std::set<std::string> leavers = std::move(live_worker_leavers_);
  std::vector<NodeEntry> left = Renumber(
      Role::kWorker, [&leavers](const NodeEntry& n) { return !leavers.count(n.info.node_id); }, 0);
  for (const std::string& node_id : leavers) leaving_.erase(node_id);
  // The worker count is in every node's list: the servers get a whole one
  // too (a delta from a list of another count is refused).
  for (NodeEntry& s : servers_) {
    s.acked_round = 0;
    s.acked_generation = -1;
  }
  live_lost_.clear();  // 15. a lost worker's change: it was one of the leavers
  std::vector<Joiner> joining;
  joining.swap(live_joiners_);
  for (Joiner& j : joining) {
    auto conn = j.conn.lock();  // FinishWorkersLive found each connected
    if (!conn) continue;
    if (!reference_config_) reference_config_ = j.req.config;
    NodesOf(Role::kWorker).emplace_back();
    admitting_live_ = true;
    Admit(conn, j.request_id, j.info, "joins the running job, assign", j.req);
    admitting_live_ = false;
  }
  RequeueLiveJoiners();  // clears the rest of the change (its joiners are in)
  // Workers that stay may wait in a barrier counted for the old set.
  ReleaseIfComplete(BarrierGroup::kWorkers);
  ReleaseIfComplete(BarrierGroup::kAll);
  SendOff(left, step);
  if (joining.empty()) SendTopology();  // else the last Admit sent it
  log_->info("live change done: the job runs with {} workers from step {}, {} joined and {} left",
             Count(Role::kWorker), step, joining.size(), left.size());
}

void Scheduler::CallServers(MessageBody request, std::function<void(const Status&)> then,
                            std::function<void(const Incoming&)> each) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (servers_.empty()) return then(Status::OK());
  auto asked = std::make_shared<CountDown>(servers_.size(), std::move(then));
  for (NodeEntry& s : servers_) {
    auto conn = s.conn.lock();
    if (!conn || conn->closed()) {
      asked->Report(Unavailable(Describe(s) + " is not connected"));
      continue;
    }
    conn->Call(request, [asked, each](StatusOr<Incoming> reply) {
      if (reply.ok() && each) each(*reply);
      asked->Report(reply.status());
    });
  }
}

}  // namespace pstrain
