// Scheduler step 10 (roles/scheduler/scheduler.h): stopping on request,
// and the hold at a step every worker reaches that a change of an elastic
// job's shape uses too (roles/scheduler/elastic.cc).
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "comm/transport/completion.h"
#include "roles/scheduler/scheduler.h"

namespace pstrain {

// 10. Ask every worker where it is, then stop all after the furthest.
void Scheduler::BeginStop(const std::string& why) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (shutting_down_ || !stop_reason_.empty()) return;
  if (!live_lost_.empty() || !live_ranks_.empty()) {
    // 15, 16. A live change of workers under way finishes first: its
    // workers are held between two barriers, its joiners half admitted.
    if (stop_after_change_.empty())
      log_->warn("stopping on request ({}) once the live change of workers is done", why);
    stop_after_change_ = why;
    return;
  }
  stop_reason_ = why;
  if (!topology_sent_ || paused_) {
    log_->warn("stopping on request ({}) before the job runs: ending it now", why);
    const std::string stopped = "stopped on request: " + why;
    EndNow(Shutdown{stopped, false, /*stopped=*/true}, Cancelled(stopped));
    return;
  }
  RefuseJoiners("the job is stopping");
  log_->warn("stopping on request ({}): asking the workers how far they are", why);
  if (reshaping_) {
    // The workers already stop for a change of shape: stopping wins.
    reshaping_ = false;
    if (reshape_step_ >= 0) return StopAt(reshape_step_, why);
  }
  AskWorkersWhere(why, [this, why](const Status& st, const WorkersWhere& where) {
    if (!st.ok()) return AbortOnLoop(st.WithContext("stopping on request"));
    StopAt(where.furthest, why);
  });
}

void Scheduler::StopIfAsked() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (stop_after_change_.empty()) return;
  BeginStop(std::exchange(stop_after_change_, std::string()));
}

void Scheduler::AskWorkersWhere(const std::string& why,
                                std::function<void(const Status&, const WorkersWhere&)> then) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  auto where = std::make_shared<WorkersWhere>();
  std::vector<NodeEntry*> asking;
  for (NodeEntry& w : workers_)
    if (!live_lost_.count(w.info.node_id)) asking.push_back(&w);
  if (asking.empty()) return then(Unavailable("no worker is left to ask"), *where);
  auto asked = std::make_shared<CountDown>(
      asking.size(), [this, where, generation = generation_, then](const Status& st) {
        if (generation != generation_) return;  // a pause came first: its own rules apply
        then(st, *where);
      });
  for (NodeEntry* w : asking) {
    auto conn = w->conn.lock();
    if (!conn) {
      asked->Report(Unavailable(Describe(*w) + " is not connected"));
      continue;
    }
    conn->Call(Stop{why, -1}, [asked, where](StatusOr<Incoming> reply) {
      if (!reply.ok()) return asked->Report(reply.status());
      if (auto* at = std::get_if<StopReply>(&reply->message.body)) {
        if (at->step > where->furthest) {
          *where = {at->step, at->rest_from};
        } else if (at->step == where->furthest) {
          where->rest_from = std::min(where->rest_from, at->rest_from);  // -1 stays unknown
        }
      }
      asked->Report(Status::OK());
    });
  }
}

void Scheduler::StopAt(int64_t step, const std::string& why) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  log_->info("every worker stops after step {}", step);
  for (NodeEntry& w : workers_)
    if (auto conn = w.conn.lock()) conn->Call(Stop{why, step}, [](StatusOr<Incoming>) {});
}

}  // namespace pstrain
