// Scheduler step 15 (roles/scheduler/scheduler.h): a worker of an elastic
// job that changes workers live is lost, and the job loses no step. The
// servers first refuse its pushes and say the last step it pushed a
// gradient of, L (LoseWorker).
//   sync (ElasticBounds::finish_lost): the other workers are told that the
//     job goes on without it from step L + 1 (Stop with lost, workers and
//     ranks), then the servers finish step L without it and call off step
//     L + 1 (roles/server/update_core.h): a worker whose step L + 1 is
//     refused knows it was called off, and trains it again after the
//     change.
//   async and ssp (drop_lost): nothing waits for it (the servers take it
//     out of the ssp clock at once). The others say where they are, and
//     the job goes on without it from the furthest step S (at least
//     L + 1); the batches it had at steps L + 1 .. S - 1 are trained first
//     after the change (Stop's lost_from; roles/checkpoint/worker_place.h,
//     WithUntrainedBatches). Batches of an epoch before S's cannot be made
//     up there: then the job goes back to its newest checkpoint.
// At the change's step the workers change live, as for a leave (step 16,
// roles/scheduler/live_workers.cc): nothing is redone and no checkpoint
// is written. Anything failing on the way falls back to the drop of step
// 13: a rollback to the newest checkpoint.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "comm/transport/completion.h"
#include "roles/scheduler/scheduler.h"

namespace pstrain {

bool Scheduler::FinishWithoutLost(NodeEntry& node, const std::string& what) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (node.info.role != Role::kWorker || !elastic_.GoesOnWithoutLost() || !topology_sent_ ||
      paused_ || reshaping_ || shutting_down_ || !stop_reason_.empty() || !live_lost_.empty() ||
      servers_.empty())
    return false;
  if (Count(Role::kWorker) - Leaving(Role::kWorker) - 1 < elastic_.min_workers) return false;
  const std::string node_id = node.info.node_id;
  const int rank = node.info.rank;
  live_lost_.insert(node_id);
  leaving_[node_id] = "lost";
  reshaping_ = true;
  reshape_step_ = -1;
  log_->warn("a worker was lost ({}); {}", what,
             elastic_.finish_lost ? "the other workers finish the step under way without it"
                                  : "the other workers go on without it");
  const std::string why = fmt::format(
      "worker {} (node id {}) was lost mid-step; the job goes on without it", rank, node_id);
  AskServers(LoseWorker{rank, -1, why}, [this, node_id, rank, why](const Status& st, int64_t last) {
    if (!live_lost_.count(node_id)) return;  // a pause came first
    if (!st.ok()) return BeginPause("going on without a lost worker: " + st.message());
    if (elastic_.finish_lost) {
      if (last < 0) return BeginPause(fmt::format("{} before it pushed any step", why));
      return GoOnWithoutLost(node_id, rank, last, last + 1, why);
    }
    AskWorkersWhere(
        why, [this, node_id, rank, last, why](const Status& st, const WorkersWhere& where) {
          if (!live_lost_.count(node_id)) return;
          if (!st.ok()) return BeginPause("going on without a lost worker: " + st.message());
          const int64_t at = std::max(where.furthest, last + 1);
          if (at > last + 1 && (where.rest_from < 0 || last + 1 < where.rest_from))
            return BeginPause(fmt::format(
                "{}: its batches of steps {} to {} lie in an epoch the others have finished{}", why,
                last + 2, at, where.rest_from < 0 ? " (or a worker was still starting)" : ""));
          GoOnWithoutLost(node_id, rank, last, at, why);
        });
  });
  return true;
}

void Scheduler::GoOnWithoutLost(const std::string& node_id, int rank, int64_t last, int64_t at,
                                const std::string& why) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  reshape_step_ = at;
  if (elastic_.finish_lost) {
    leaving_[node_id] = fmt::format("lost: step {} finished without it, nothing redone", last + 1);
  } else if (at == last + 1) {
    leaving_[node_id] =
        fmt::format("lost: it had pushed every batch before step {}, nothing redone", at + 1);
  } else {
    leaving_[node_id] = fmt::format(
        "lost: its batches of steps {} to {} trained first by the others, nothing redone", last + 2,
        at);
  }
  // The change at `at` (step 16) drops it; the others keep their order.
  LogLiveWorkers(Count(Role::kWorker), at, PlanLiveWorkers({node_id}, {}));
  // The workers first: each knows where the job goes on without it before
  // a step of its own can be called off. Each acknowledges before it can
  // reach that step's barrier (roles/worker/trainer_workers.cc), so the
  // servers have LoseWorker(rank, L) before the chief's report there, and
  // ahead of ChangeWorkers on each connection.
  std::vector<NodeEntry*> told;
  for (NodeEntry& w : workers_)
    if (!live_lost_.count(w.info.node_id) && w.conn.lock()) told.push_back(&w);
  if (told.empty()) return BeginPause(why + "; no other worker is connected");
  auto stopped = std::make_shared<CountDown>(told.size(), [this, node_id, rank, why, last,
                                                           at](const Status& st) {
    if (!live_lost_.count(node_id)) return;
    if (!st.ok()) return BeginPause("going on without a lost worker: " + st.message());
    if (!elastic_.finish_lost) {
      log_->info(
          "worker {} pushed its last step, {}; the others go on without it from step "
          "{}{}",
          rank, last + 1, at + 1,
          at > last + 1
              ? fmt::format(", training its batches of steps {} to {} first", last + 2, at)
              : "");
      return;
    }
    AskServers(LoseWorker{rank, last, why}, [this, node_id, rank, last](const Status& st, int64_t) {
      if (!live_lost_.count(node_id)) return;
      if (!st.ok()) return BeginPause("going on without a lost worker: " + st.message());
      log_->info("step {} finished without worker {}; the others go on without it from step {}",
                 last + 1, rank, last + 2);
    });
  });
  for (NodeEntry* w : told) {
    w->conn.lock()->Call(Stop{why, at, 0, {}, {rank}, live_workers_, live_ranks_, last + 1},
                         [stopped](StatusOr<Incoming> reply) { stopped->Report(reply.status()); });
  }
}

void Scheduler::AskServers(LoseWorker request, std::function<void(const Status&, int64_t)> then) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  auto last = std::make_shared<int64_t>(-1);
  CallServers(
      request, [last, then = std::move(then)](const Status& st) { then(st, *last); },
      [last](const Incoming& reply) {
        if (const auto* held = std::get_if<LoseWorkerReply>(&reply.message.body))
          *last = std::max(*last, held->last_step);
      });
}

void Scheduler::ForgetLiveLoss(const std::string& why) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (live_lost_.empty()) return;
  std::set<std::string> lost;
  lost.swap(live_lost_);
  for (const std::string& node_id : lost) leaving_.erase(node_id);
  const int old_count = Count(Role::kWorker);
  Renumber(
      Role::kWorker, [&lost](const NodeEntry& n) { return !lost.count(n.info.node_id); }, 0);
  const std::string line = fmt::format(
      "elastic: workers {} -> {} from the newest checkpoint: worker node id:{} was lost, and the "
      "step under way could not finish without it ({})",
      old_count, Count(Role::kWorker), fmt::join(lost, ", "), why);
  log_->warn("{}", line);
  RecordChange(line);
}

}  // namespace pstrain
