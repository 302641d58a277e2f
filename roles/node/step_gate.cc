// ClusterClient's stop gate (roles/node/cluster_client.h): a worker held at its
// step boundary while the scheduler settles on a step (scheduler step 10), and
// the changes of a running elastic job that take effect there: servers live
// (14), a lost worker's step finished without it (15), workers live (16).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "roles/node/cluster_client.h"

namespace pstrain {

// 10. The scheduler asks each worker how far it is (at_step -1) and holds it
// at its next step boundary, then tells every worker the step to stop at.
void ClusterClient::OnStop(const Connection::Ptr& conn, uint64_t id, const Stop& stop) {
  MutexLock lock(&stop_mutex_);
  if (stop.servers > 0) {  // 14. not a stop: the job gains servers at that step
    grow_at_ = stop.at_step;
    grow_servers_ = stop.servers;
    grow_slots_ = stop.slots;
    hold_ = false;
    stop_changed_.NotifyAll();
    log_->info("the job gains servers: {} from step {} on ({})", stop.servers, stop.at_step,
               stop.reason);
    return conn->Reply(id, Ack{});
  }
  if (stop.workers > 0 && stop.at_step >= 0) {  // 16. not a stop: the workers change
    const int rank = rank_.load();
    if (rank < 0 || rank >= static_cast<int>(stop.ranks.size())) {
      log_->warn("a change of workers names {} ranks; this is worker {}", stop.ranks.size(), rank);
      return conn->Reply(id, ErrorReply{"a change of workers without this worker's rank"});
    }
    change_ = WorkersChange{stop.at_step, stop.workers, stop.ranks};
    if (!stop.lost.empty()) {  // 15. the step before finishes without them
      lost_workers_ = stop.lost;
      lost_step_ = stop.at_step;
      lost_from_ = stop.lost_from >= 0 ? stop.lost_from : stop.at_step;
    }
    rank_after_ = stop.ranks[static_cast<size_t>(rank)];
    workers_after_ = stop.workers;
    hold_ = false;
    stop_changed_.NotifyAll();
    log_->info("{}; {} workers from step {} on", stop.reason, stop.workers, stop.at_step);
    return conn->Reply(id, Ack{});
  }
  if (stop.at_step < 0) {
    hold_ = true;
    if (started_) {
      conn->Reply(id, StopReply{steps_started_, rest_from_});
    } else {  // still resuming: StartingAt answers
      asked_conn_ = conn;
      asked_id_ = id;
    }
    return;
  }
  stop_at_ = stop.at_step;
  hold_ = false;
  stop_changed_.NotifyAll();
  log_->info("the job stops after step {}: {}", stop.at_step, stop.reason);
  conn->Reply(id, Ack{});
}

void ClusterClient::ReleaseHold() {
  MutexLock lock(&stop_mutex_);
  hold_ = false;
  stop_changed_.NotifyAll();
}

void ClusterClient::StartingAt(int64_t step, int64_t rest_from) {
  MutexLock lock(&stop_mutex_);
  StartingAtLocked(step, rest_from);
}

void ClusterClient::StartingAtLocked(int64_t step, int64_t rest_from) {
  started_ = true;
  steps_started_ = step;
  rest_from_ = rest_from;
  auto conn = asked_conn_.lock();
  asked_conn_.reset();
  if (!conn) return;
  loop_->Post([conn, id = asked_id_, step, rest_from] {
    if (!conn->closed()) conn->Reply(id, StopReply{step, rest_from});
  });
}

bool ClusterClient::BeginStep(int64_t step, int64_t next_rest_from) {
  MutexLock lock(&stop_mutex_);
  if (!started_) StartingAtLocked(step, -1);
  const auto limit = std::chrono::milliseconds(2 * Millis(options_.cluster.heartbeat_timeout_s));
  if (!stop_changed_.WaitFor(&lock, limit, [this]() REQUIRES(stop_mutex_) { return !hold_; })) {
    log_->warn(
        "the scheduler asked where this worker is but named no step to stop at within {} "
        "ms; going on",
        limit.count());
    hold_ = false;
  }
  if (stop_at_ >= 0 && step >= stop_at_) return false;
  if (step + 1 > steps_started_) {
    steps_started_ = step + 1;
    rest_from_ = next_rest_from;
  }
  return true;
}

int64_t ClusterClient::AwaitLostStep() {
  // Only a job that finishes a lost worker's step is told where it goes on
  // without it; a verdict (a pause, the end) ends the wait too (SetVerdict
  // notifies).
  if (!options_.cluster.elastic.GoesOnWithoutLost()) return -1;
  MutexLock lock(&stop_mutex_);
  const auto limit = std::chrono::milliseconds(2 * Millis(options_.cluster.heartbeat_timeout_s));
  stop_changed_.WaitFor(
      &lock, limit, [this]() REQUIRES(stop_mutex_) { return lost_step_ >= 0 || verdict_.IsSet(); });
  return lost_step_;
}

int64_t ClusterClient::LostStep() {
  MutexLock lock(&stop_mutex_);
  return lost_step_;
}

int64_t ClusterClient::LostFrom() {
  MutexLock lock(&stop_mutex_);
  return lost_from_;
}

void ClusterClient::PlannedRestFrom(int64_t step, int64_t rest_from) {
  MutexLock lock(&stop_mutex_);
  if (steps_started_ == step) rest_from_ = rest_from;
}

std::vector<int> ClusterClient::LostWorkers() {
  MutexLock lock(&stop_mutex_);
  return lost_workers_;
}

void ClusterClient::ForgetLostWorkers() {
  MutexLock lock(&stop_mutex_);
  lost_workers_.clear();
  lost_step_ = -1;
  lost_from_ = -1;
}

ClusterClient::WorkersChange ClusterClient::WorkersChangeAt(int64_t step) {
  MutexLock lock(&stop_mutex_);
  if (change_.workers == 0 || step < change_.at_step) return {};
  WorkersChange change = std::move(change_);
  change_ = {};
  return change;
}

void ClusterClient::EnterWorkersChange() { in_workers_change_ = true; }

Status ClusterClient::AwaitRank(int rank, int workers) {
  const auto limit = std::chrono::milliseconds(2 * Millis(options_.cluster.heartbeat_timeout_s));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (rank_.load() != rank || worker_num_.load() != workers) {
    if (std::chrono::steady_clock::now() >= deadline)
      return DeadlineExceeded(fmt::format(
          "the topology of {} workers naming this worker rank {} did not come within {} ms",
          workers, rank, limit.count()));
    if (verdict_.IsSet()) return Aborted("the job was paused or ended during a change of workers");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Status::OK();
}

Status ClusterClient::ReportWorkersAt(int64_t step, int workers) {
  return CallScheduler(ShapeChanged{step, server_num_.load(), 0, workers},
                       "change the workers live")
      .status();
}

int ClusterClient::GrowsAt(int64_t step, std::vector<int>* slots) {
  MutexLock lock(&stop_mutex_);
  if (grow_servers_ == 0 || step < grow_at_) return 0;
  const int servers = grow_servers_;
  grow_servers_ = 0;
  *slots = std::move(grow_slots_);
  grow_slots_.clear();
  return servers;
}

void ClusterClient::AdoptRank(int rank) {
  const int was = rank_.exchange(rank);
  if (was == rank) return;
  log_->info("this {} holds rank {} from now on (it held {}): the job's {}s changed",
             RoleName(options_.role), rank, was, RoleName(options_.role));
  // Its log lines name the new rank; its metrics file keeps the name it
  // opened with (another node may have written one under the new rank).
  SetLogLabel(log_, fmt::format("{} {}", RoleName(options_.role), rank));
}

Status ClusterClient::ReportShapeChanged(int64_t step, int servers, int partitions) {
  return CallScheduler(ShapeChanged{step, servers, partitions}, "report the new shape").status();
}

}  // namespace pstrain
