// Scheduler step 13 (roles/scheduler/scheduler.h): an elastic job changes
// shape while it runs.
//
// A change is a join (a node registered while the job was below its
// maximum), a leave (SIGTERM to a node, or `pstrain scale` below the
// current shape) or a lost node above the minimum. Joins and leaves wait
// for a step every worker reaches, as stopping does: the workers are held
// at their next step boundary, told to stop after the furthest, S, and the
// chief checkpoints S. Then the job pauses with its new shape: leaving
// nodes get Shutdown and exit 0, the others register again with their new
// rank (the nodes that stay keep their order, the joiners come after them)
// and everyone resumes from S. Servers gather their new shards from the
// checkpoint (roles/server/reshard.h), workers re-split the rest of the
// epoch (roles/checkpoint/worker_place.h): no step is redone and no update
// is lost. A lost node cannot finish its step, so its drop resumes from
// the newest checkpoint, as a rollback does.
#include <fmt/format.h>

#include <algorithm>

#include "roles/scheduler/scheduler.h"

namespace pstrain {

namespace {

constexpr size_t kShapeChangesKept = 32;

}  // namespace

std::string Scheduler::DescribeBounds(const ElasticBounds& e) {
  std::string out = fmt::format("workers [{}, {}]", e.min_workers, e.max_workers);
  if (e.servers_elastic()) out += fmt::format(", servers [{}, {}]", e.min_servers, e.max_servers);
  return out;
}

void Scheduler::RecordChange(const std::string& line) {
  shape_changes_.push_back(line);
  if (shape_changes_.size() > kShapeChangesKept) shape_changes_.erase(shape_changes_.begin());
}

int Scheduler::Joining(Role role) const {
  int n = 0;
  for (const Joiner& j : joiners_) n += j.info.role == role ? 1 : 0;
  for (const Joiner& j : live_joiners_) n += j.info.role == role ? 1 : 0;
  return n;
}

int Scheduler::Leaving(Role role) const {
  int n = 0;
  for (const auto& [node_id, why] : leaving_) {
    auto it = rank_of_.find(node_id);
    n += it != rank_of_.end() && it->second.first == role ? 1 : 0;
  }
  return n;
}

void Scheduler::RefuseJoiners(const std::string& why) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  for (const Joiner& j : joiners_)
    if (auto c = j.conn.lock()) c->Reply(j.request_id, ErrorReply{why});
  joiners_.clear();
}

void Scheduler::QueueJoiner(const Connection::Ptr& conn, uint64_t id, const RegisterRequest& req,
                            NodeInfo info) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const Role role = info.role;
  std::string refused;
  if (!elastic_.Elastic(role)) {
    refused = fmt::format(
        "the job runs with its {} servers and train.elastic sets no servers: [min, max] bounds, "
        "so no server can join",
        Count(role));
  } else if (shutting_down_ || !stop_reason_.empty()) {
    refused = "the job is stopping";
  } else {
    const int max = elastic_.Max(role);
    const int after = Count(role) - Leaving(role) + Joining(role);
    if (after >= max)
      refused = fmt::format(
          "the job has {} {}s{} and train.elastic allows at most {} ({})", Count(role),
          RoleName(role), Joining(role) > 0 ? fmt::format(" ({} more joining)", Joining(role)) : "",
          max, DescribeBounds(elastic_));
  }
  if (!refused.empty()) {
    log_->warn("refused {} node id:{} from {}: {}", RoleName(role), info.node_id, conn->peer(),
               refused);
    conn->Reply(id, ErrorReply{refused});
    return;
  }
  for (Joiner& j : joiners_)
    if (j.info.node_id == info.node_id) {  // it asked again: its last connection is the one
      j = Joiner{conn, id, req, info};
      return;
    }
  log_->info(
      "{} node id:{} ({}:{}) registered while the job runs: it joins at the next step "
      "every worker reaches",
      RoleName(role), info.node_id, info.host, info.port);
  joiners_.push_back(Joiner{conn, id, req, info});
  reshape_reasons_.push_back(fmt::format("{} node id:{} joins", RoleName(role), info.node_id));
  MaybeReshape();
}

bool Scheduler::Leave(NodeEntry& node, const std::string& why) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const Role role = node.info.role;
  if (shutting_down_ || !stop_reason_.empty() || !topology_sent_) return false;
  if (leaving_.count(node.info.node_id)) return true;
  const int min = elastic_.Min(role);
  if (!elastic_.Elastic(role) || Count(role) - Leaving(role) - 1 < min) {
    log_->warn("{} cannot leave: {}; stopping the whole job instead", Describe(node),
               !elastic_.Elastic(role)
                   ? "train.elastic sets no servers: bounds, so the server count is fixed"
                   : fmt::format("the job would have fewer than its minimum of {} {}s ({})", min,
                                 RoleName(role), DescribeBounds(elastic_)));
    return false;
  }
  leaving_[node.info.node_id] = why;
  reshape_reasons_.push_back(
      fmt::format("{} node id:{} leaves ({})", RoleName(role), node.info.node_id, why));
  MaybeReshape();
  return true;
}

void Scheduler::HandleScale(const Connection::Ptr& conn, uint64_t id, const ScaleRequest& request) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  auto refuse = [&](const std::string& why) {
    log_->warn("refused a scale request from {}: {}", conn->peer(), why);
    conn->Reply(id, ErrorReply{why});
  };
  if (!topology_sent_ && rank_of_.empty())
    return refuse("no node has registered yet: scale a job once it runs");
  if (!elastic_.enabled())
    return refuse(
        fmt::format("the job is not elastic: its shape is fixed at {} servers and {} workers (set "
                    "train.elastic to change it while it runs)",
                    Count(Role::kServer), Count(Role::kWorker)));
  if (shutting_down_ || !stop_reason_.empty()) return refuse("the job is stopping");
  auto wanted = [&request](Role role) {
    return role == Role::kWorker ? request.workers : request.servers;
  };
  for (Role role : {Role::kWorker, Role::kServer}) {
    const int want = wanted(role);
    if (want < 0 || (!elastic_.Elastic(role) && want == Count(role))) continue;
    if (!elastic_.Elastic(role))
      return refuse(fmt::format(
          "the job's server count is fixed at {}: train.elastic sets no servers: [min, max]",
          Count(role)));
    if (want < elastic_.Min(role) || want > elastic_.Max(role))
      return refuse(fmt::format("{} {}s is outside train.elastic ({})", want, RoleName(role),
                                DescribeBounds(elastic_)));
  }
  std::vector<std::string> said;
  for (Role role : {Role::kWorker, Role::kServer}) {
    const int want = wanted(role);
    if (want < 0) continue;
    const int now = Count(role) - Leaving(role) + Joining(role);
    if (want == now) {
      said.push_back(fmt::format("{} {}s as now", want, RoleName(role)));
      continue;
    }
    if (want > now) {
      said.push_back(fmt::format("{} {}s: start {} more (they join as they register)", want,
                                 RoleName(role), want - now));
      continue;
    }
    // Fewer: joiners not yet in go first, then the highest ranks leave.
    int excess = now - want;
    for (auto it = joiners_.end(); excess > 0 && it != joiners_.begin();) {
      --it;
      if (it->info.role != role) continue;
      if (auto c = it->conn.lock())
        c->Reply(it->request_id,
                 ErrorReply{fmt::format("the job was scaled to {} {}s", want, RoleName(role))});
      it = joiners_.erase(it);
      --excess;
    }
    std::vector<NodeEntry>& nodes = NodesOf(role);
    for (size_t r = nodes.size(); excess > 0 && r-- > 0;) {
      NodeEntry& n = nodes[r];
      if (n.info.node_id.empty() || leaving_.count(n.info.node_id)) continue;
      leaving_[n.info.node_id] = "pstrain scale";
      --excess;
    }
    said.push_back(fmt::format("{} {}s: {} {} at the next step every worker reaches", want,
                               RoleName(role), now - want, now - want == 1 ? "leaves" : "leave"));
    reshape_reasons_.push_back(fmt::format("pstrain scale to {} {}s", want, RoleName(role)));
  }
  const std::string message = fmt::format("{}", fmt::join(said, "; "));
  log_->info("scale request from {}: {}", conn->peer(), message);
  conn->Reply(id, ScaleReply{message});
  MaybeReshape();
}

void Scheduler::MaybeReshape() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  // Joiners whose connection is gone no longer wait.
  joiners_.erase(std::remove_if(joiners_.begin(), joiners_.end(),
                                [](const Joiner& j) {
                                  auto c = j.conn.lock();
                                  return !c || c->closed();
                                }),
                 joiners_.end());
  if (joiners_.empty() && leaving_.empty()) return;
  if (!topology_sent_ || paused_ || reshaping_ || shutting_down_ || !stop_reason_.empty()) return;
  if (CanChangeWorkersLive()) return ChangeWorkersLive();
  if (CanGrowLive()) return GrowLive();
  if (CanShrinkLive()) return ShrinkLive();
  const std::string why = fmt::format("{}", fmt::join(reshape_reasons_, "; "));
  HoldForChange("changing the job's shape", why, [this, why](int64_t furthest) {
    StopAt(furthest, "the job changes shape: " + why);
  });
}

void Scheduler::HoldForChange(const char* what, const std::string& why,
                              std::function<void(int64_t furthest)> then) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  reshaping_ = true;
  ++change_round_;     // a copy ahead still answering is for another change
  reshape_step_ = -1;  // known once every worker said where it is
  log_->info("{} ({}): asking the workers how far they are", what, why);
  AskWorkersWhere(
      why, [this, what, then = std::move(then)](const Status& st, const WorkersWhere& where) {
        const int64_t furthest = where.furthest;
        if (!reshaping_) return;  // stopped or paused meanwhile
        if (!st.ok()) {
          // A worker did not answer: it is lost, and its loss is handled as
          // such (a pause in which every node registers again, joiners too).
          log_->warn("{}: {}", what, st.message());
          reshaping_ = false;
          RequeueLiveJoiners();
          StopIfAsked();
          return;
        }
        reshape_step_ = furthest;
        then(furthest);
      });
}

// 14. Only servers leave: those that stay keep their ranks, but for the
// highest, which take the ranks of leavers below them.
bool Scheduler::CanShrinkLive() const {
  if (!options_.elastic.servers_elastic() || leaving_.empty()) return false;
  // Servers joining meanwhile join next, unless they could join first.
  for (const Joiner& j : joiners_)
    if (j.info.role != Role::kServer) return false;
  if (!joiners_.empty() && CanGrowLive()) return false;
  const int servers = Count(Role::kServer), leaving = static_cast<int>(leaving_.size());
  return leaving < servers && Leaving(Role::kServer) == leaving;
}

// 14. The workers shrink at step S: the chief moves the leaving servers'
// partitions to those that stay, every worker drops its connections to the
// leavers, and only then are the leavers told to go (HandleShapeChanged).
void Scheduler::ShrinkLive() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const int old_servers = Count(Role::kServer);
  const int servers = old_servers - static_cast<int>(leaving_.size());
  std::vector<std::string> who;
  // A leaver's rank below the new count goes to the next staying server
  // above it: ranks stay 0..servers-1 with as few changes as can be.
  std::vector<int> slots(static_cast<size_t>(servers));
  std::vector<int> movers;  // staying ranks >= servers, in order
  for (int r = 0; r < old_servers; ++r) {
    const bool leaves = leaving_.count(servers_[r].info.node_id) > 0;
    if (leaves)
      who.push_back(fmt::format("server node id:{} leaves ({})", servers_[r].info.node_id,
                                leaving_[servers_[r].info.node_id]));
    if (r < servers) slots[r] = leaves ? -1 : r;
    if (r >= servers && !leaves) movers.push_back(r);
  }
  size_t next = 0;
  for (int s = 0; s < servers; ++s) {
    if (slots[s] >= 0) continue;
    slots[s] = movers[next++];
    who.push_back(
        fmt::format("server node id:{} takes rank {}", servers_[slots[s]].info.node_id, s));
  }
  bool same = true;
  for (int s = 0; s < servers; ++s) same &= slots[s] == s;
  if (same) slots.clear();
  // Nodes that ask to leave while this change runs wait for the next one.
  live_leavers_.clear();
  for (const auto& [node_id, why] : leaving_) live_leavers_.insert(node_id);
  reshape_reasons_.clear();
  ChangeServersLive(old_servers, servers, fmt::format("{}", fmt::join(who, "; ")),
                    std::move(slots));
}

bool Scheduler::CanGrowLive() const {
  // Servers leaving meanwhile leave in a live change of their own, next;
  // first, when the joiners would take the job past its maximum (every
  // node refuses a topology beyond its bounds).
  if (!options_.elastic.servers_elastic() || joiners_.empty() ||
      Leaving(Role::kServer) != static_cast<int>(leaving_.size()))
    return false;
  for (const Joiner& j : joiners_)
    if (j.info.role != Role::kServer) return false;
  return Count(Role::kServer) + static_cast<int>(joiners_.size()) <= elastic_.Max(Role::kServer);
}

// 14. The joiners are admitted now, with ranks after the servers there are;
// the workers learn of them in the topology, then grow to them at the step
// every worker reaches, S: they connect, and the chief moves partitions to
// them (roles/worker/grow.h). Nothing pauses and no checkpoint is written.
void Scheduler::GrowLive() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const int old_servers = Count(Role::kServer);
  std::vector<Joiner> joining = std::move(joiners_);
  joiners_.clear();
  reshape_reasons_.clear();
  std::vector<std::string> who;
  for (Joiner& j : joining) {
    auto conn = j.conn.lock();
    if (!conn || conn->closed()) continue;
    if (!reference_config_) reference_config_ = j.req.config;
    j.info.rank = Count(Role::kServer);
    NodesOf(Role::kServer).emplace_back();
    admitting_live_ = true;
    Admit(conn, j.request_id, j.info, "joins the running job, assign", j.req);
    admitting_live_ = false;
    who.push_back(fmt::format("server node id:{} joins as rank {}", j.info.node_id, j.info.rank));
  }
  const int servers = Count(Role::kServer);
  if (servers == old_servers) return;
  ChangeServersLive(old_servers, servers, fmt::format("{}", fmt::join(who, "; ")));
}

void Scheduler::ChangeServersLive(int old_servers, int servers, const std::string& why,
                                  std::vector<int> slots) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  live_slots_ = slots;  // for HandleShapeChanged
  reshaping_ = true;
  reshape_step_ = -1;
  // First the chief copies the table rows that move while the job trains
  // (roles/worker/rows_ahead.h): at the change only what changed since
  // moves. Not copied, they move whole then.
  NodeEntry* chief = workers_.empty() ? nullptr : &workers_[0];
  Connection::Ptr conn = chief ? chief->conn.lock() : nullptr;
  if (!conn) return HoldForServers(old_servers, servers, why, std::move(slots));
  const uint64_t round = ++change_round_;
  log_->info("the table rows that move are copied ahead of the change ({}) while the job trains",
             why);
  conn->Call(PreCopyRows{old_servers, servers, slots},
             [this, round, old_servers, servers, why, slots](StatusOr<Incoming> reply) {
               if (round != change_round_ || !reshaping_) return;  // paused or stopped
               if (!reply.ok())
                 log_->warn("table rows not copied ahead ({}): they move whole at the change",
                            reply.status().message());
               HoldForServers(old_servers, servers, why, slots);
             });
}

void Scheduler::HoldForServers(int old_servers, int servers, const std::string& why,
                               std::vector<int> slots) {
  HoldForChange(
      "changing the job's shape live", why,
      [this, why, old_servers, servers, slots](int64_t furthest) {
        const int workers = Count(Role::kWorker);
        const std::string line = fmt::format(
            "elastic: workers {} -> {}, servers {} -> {} from step {}: {} (live: "
            "partitions and table rows move {} without a checkpoint)",
            workers, workers, old_servers, servers, furthest, why,
            servers > old_servers ? "to it" : "off it");
        log_->info("{}", line);
        RecordChange(line);
        for (NodeEntry& w : workers_)
          if (auto conn = w.conn.lock())
            conn->Call(
                Stop{"the job's servers change: " + why, furthest, servers, slots, {}, 0, {}},
                [](StatusOr<Incoming>) {});
      });
}

void Scheduler::HandleShapeChanged(const Connection::Ptr& conn, uint64_t id,
                                   const ShapeChanged& changed) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (changed.workers > 0) return FinishWorkersLive(conn, id, changed);
  conn->Reply(id, Ack{});
  if (!reshaping_ || changed.step != reshape_step_) return;  // a pause came first
  reshaping_ = false;
  if (changed.servers < Count(Role::kServer)) {
    // Nothing is routed to the leavers any more: they go, the others take
    // their ranks of the new placement (their slots), and everyone hears of
    // the smaller set.
    if (!live_slots_.empty()) {
      std::vector<NodeEntry> ordered;
      std::vector<bool> placed(servers_.size(), false);
      for (int from : live_slots_) {
        ordered.push_back(std::move(servers_[static_cast<size_t>(from)]));
        placed[static_cast<size_t>(from)] = true;
      }
      for (size_t r = 0; r < servers_.size(); ++r)
        if (!placed[r]) ordered.push_back(std::move(servers_[r]));
      servers_ = std::move(ordered);
    }
    std::vector<NodeEntry> left = Renumber(
        Role::kServer, [this](const NodeEntry& n) { return !live_leavers_.count(n.info.node_id); },
        0);
    for (const std::string& node_id : live_leavers_) leaving_.erase(node_id);
    live_leavers_.clear();
    SendOff(left, changed.step);
    SendTopology();
  }
  live_slots_.clear();
  log_->info("live change done: the job runs with {} servers from step {}, {} partitions moved",
             changed.servers, changed.step, changed.partitions);
  MaybeReshape();  // changes asked for meanwhile
}

void Scheduler::SendOff(const std::vector<NodeEntry>& left, int64_t step) {
  for (const NodeEntry& n : left) {
    auto conn = n.conn.lock();
    if (!conn || conn->closed()) continue;
    conn->Call(Shutdown{fmt::format("this node left the job after step {}", step)},
               [conn](StatusOr<Incoming>) { conn->Close(Aborted("left the job")); });
  }
}

std::vector<Scheduler::NodeEntry> Scheduler::Renumber(
    Role role, const std::function<bool(const NodeEntry&)>& keep, size_t extra) {
  std::vector<NodeEntry>& nodes = NodesOf(role);
  std::vector<NodeEntry> kept, gone;
  for (NodeEntry& n : nodes) (keep(n) ? kept : gone).push_back(std::move(n));
  for (size_t r = 0; r < kept.size(); ++r) {
    NodeEntry& n = kept[r];
    n.info.rank = static_cast<int>(r);
    rank_of_[n.info.node_id] = {role, static_cast<int>(r)};
    // Ranks moved: every node gets the whole list of its peers next.
    n.entry_changed_round = topology_rounds_ + 1;
    n.acked_round = 0;
    n.acked_generation = -1;
    n.claimed_generation = -1;
  }
  for (const NodeEntry& n : gone) {
    rank_of_.erase(n.info.node_id);
    if (auto c = n.conn.lock()) node_of_.erase(c.get());
  }
  kept.resize(kept.size() + extra);
  nodes = std::move(kept);
  never_held_from_[role == Role::kServer ? 0 : 1] = 0;
  // Those gone held their ranks too: a live shrink changes no generation,
  // and a count left high would keep the next joiner's topology unsent.
  CountHeld();
  return gone;
}

void Scheduler::ApplyReshape() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  reshaping_ = false;
  live_lost_.clear();  // 15. they leave with the others (leaving_)
  const int64_t step = reshape_step_;
  const int old_servers = Count(Role::kServer), old_workers = Count(Role::kWorker);
  std::vector<Joiner> joining;
  for (Joiner& j : joiners_)
    if (auto c = j.conn.lock(); c && !c->closed()) joining.push_back(std::move(j));
  joiners_.clear();
  std::vector<std::string> who;
  std::vector<NodeEntry> left;
  for (Role role : {Role::kServer, Role::kWorker}) {
    size_t joins = 0;
    for (const Joiner& j : joining) joins += j.info.role == role ? 1 : 0;
    std::vector<NodeEntry> gone = Renumber(
        role, [this](const NodeEntry& n) { return !leaving_.count(n.info.node_id); }, joins);
    for (NodeEntry& n : gone) {
      who.push_back(fmt::format("{} node id:{} leaves ({})", RoleName(role), n.info.node_id,
                                leaving_[n.info.node_id]));
      left.push_back(std::move(n));
    }
  }
  leaving_.clear();
  reshape_reasons_.clear();
  // Joiners take the slots after the nodes that stay, in the order they came.
  std::array<int, 2> next_rank{};
  for (Role role : {Role::kServer, Role::kWorker}) {
    int joins = 0;
    for (const Joiner& j : joining) joins += j.info.role == role ? 1 : 0;
    next_rank[role == Role::kServer ? 0 : 1] = Count(role) - joins;
  }
  for (Joiner& j : joining) {
    j.info.rank = next_rank[j.info.role == Role::kServer ? 0 : 1]++;
    who.push_back(fmt::format("{} node id:{} joins as rank {}", RoleName(j.info.role),
                              j.info.node_id, j.info.rank));
  }
  const std::string line = fmt::format(
      "elastic: workers {} -> {}, servers {} -> {} from step {}: {}", old_workers,
      Count(Role::kWorker), old_servers, Count(Role::kServer), step, fmt::join(who, "; "));
  log_->info("{}", line);
  RecordChange(line);
  SendOff(left, step);
  BeginPause(fmt::format("its shape changes from step {}", step), /*reshape=*/true);
  for (Joiner& j : joining) {
    auto conn = j.conn.lock();
    if (!conn) continue;  // its slot waits for the pause's deadline, like a lost node's
    if (!reference_config_) reference_config_ = j.req.config;
    Admit(conn, j.request_id, j.info, "joins, assign", j.req);
  }
}

bool Scheduler::DropLost(NodeEntry& node, const std::string& what) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const Role role = node.info.role;
  if (!elastic_.Elastic(role) || Count(role) - 1 < elastic_.Min(role)) return false;
  const std::string node_id = node.info.node_id;
  leaving_.erase(node_id);
  const int old_count = Count(role);
  Renumber(
      role, [&node_id](const NodeEntry& n) { return n.info.node_id != node_id; }, 0);
  const std::string line = fmt::format(
      "elastic: {}s {} -> {} from the newest checkpoint: {} node id:{} was lost ({}); the others "
      "go on without it",
      RoleName(role), old_count, Count(role), RoleName(role), node_id, what);
  log_->warn("{}", line);
  RecordChange(line);
  BeginPause(what, /*reshape=*/true);
  return true;
}

}  // namespace pstrain
