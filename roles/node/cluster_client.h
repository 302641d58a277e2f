// ClusterClient: a server's or worker's side of the scheduler protocol
// (see roles/scheduler/scheduler.h): join the job, heartbeats both ways, barriers,
// Done, and the scheduler's verdicts (Shutdown, Pause).
//
// The verdict ends the node's part in this generation of the job: OK when
// the job is over, Aborted with the scheduler's reason when it ended the job
// or paused it (paused() tells which). When one comes, the client calls the
// interrupt hook, which closes the node's connections so that every thread
// waiting on a peer returns.
//
// A lost scheduler is not a verdict: the node keeps training and reconnects
// in the background (up to the connect timeout), then re-registers with its
// rank (rejoin). Calls to the scheduler wait for that. Only when it cannot
// be reached again does the node's verdict become Unavailable.
//
// The public methods block and must be called from the node's own thread,
// never from the loop thread; the protocol itself runs on the loop. The stop
// gate and a running elastic job's changes are in roles/node/step_gate.cc.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/transport/completion.h"
#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/timer.h"
#include "roles/node/stall_watch.h"
#include "src/common/config/options.h"
#include "src/common/logging.h"
#include "src/common/mutex.h"

namespace pstrain {

class ClusterClient {
 public:
  ClusterClient(EventLoop* loop, NodeOptions options, Logger log);

  // Called on the loop thread when a verdict comes (see above).
  void SetInterruptHook(std::function<void(const Status&)> hook) { interrupt_ = std::move(hook); }
  // Messages from the scheduler for the node's role (a server's LoseWorker):
  // `handler` answers them and returns true, or returns false for one it
  // does not take. Set before Join; called on the loop thread.
  using RequestHandler =
      std::function<bool(const Connection::Ptr& conn, uint64_t id, const MessageBody& body)>;
  void SetRequestHandler(RequestHandler handler) { role_requests_ = std::move(handler); }

  // Connects to the scheduler (retrying until options.cluster.connect_timeout_s
  // has passed), registers this node as listening on `listen_port`, and waits
  // for the topology. The error names the scheduler address tried.
  StatusOr<Topology> Join(uint16_t listen_port);
  // Waits until every node of `group` has entered the barrier.
  Status Barrier(BarrierGroup group);
  // A barrier that also returns the smallest `value` any member gave.
  StatusOr<int64_t> AgreeMin(BarrierGroup group, int64_t value);
  // A barrier that hands every member the bytes one member gives (the
  // others pass ""; with several, the lowest rank's win). How worker 0
  // hands NCCL's unique id to the other workers. At most 4 KiB.
  StatusOr<std::string> ShareFromOne(BarrierGroup group, std::string blob);
  // Tells the scheduler this worker's work is over.
  Status ReportDone();
  // Tells the scheduler this node failed for `why`: it ends the job, or,
  // when `recoverable` (a lost peer) and the job has recovery, rolls it
  // back. `peer` is the node it lost, when known: the scheduler gives up on
  // a link that keeps failing (roles/scheduler/scheduler.h, step 5). Best effort,
  // bounded by the heartbeat timeout.
  void ReportFailure(const Status& why, bool recoverable,
                     const std::optional<NodeInfo>& peer = std::nullopt);
  // Blocks until the verdict.
  Status WaitForShutdown();
  // The verdict if it came within `timeout_s`; nullopt otherwise.
  std::optional<Status> WaitForVerdict(double timeout_s);
  // The scheduler paused the job: this node must roll back.
  bool paused() const { return paused_.load(); }

  // Stopping on request (SIGTERM, SIGINT; roles/scheduler/scheduler.h step 10).
  // Asks the scheduler to stop the job cleanly. Loop thread.
  void RequestStop(const std::string& why);
  // Workers, before step `step` (0-based): false when the job stops before
  // it. While the scheduler settles on the step every worker stops at, this
  // holds the caller at the step boundary (bounded by twice the heartbeat
  // timeout), so that no worker runs past it. `next_rest_from`: the first
  // step whose batches can still be made up at step + 1, where that step's
  // epoch's rest began (the scheduler's question's answer; -1: unknown).
  bool BeginStep(int64_t step, int64_t next_rest_from = -1);
  // Workers, after a step failed: the step at which the job goes on without
  // a lost worker (the scheduler's Stop with lost; roles/scheduler/
  // lost_worker.cc), once the scheduler named one within twice the heartbeat
  // timeout (-1: none, at once when the job does not finish a lost worker's
  // step or a verdict came). A step at or past it was called off: it is
  // trained again after the change of workers there.
  int64_t AwaitLostStep();
  // The same, as known now (-1: none yet).
  int64_t LostStep();
  // The first step the lost workers pushed nothing of (-1: none known).
  int64_t LostFrom();
  // Workers, once the step `step` they start next is planned anew (a
  // resume, a live change): where its epoch's rest began (BeginStep's
  // next_rest_from). Any thread.
  void PlannedRestFrom(int64_t step, int64_t rest_from);
  // The worker ranks the job lost and finishes its step under way without
  // (the scheduler's Stop says which); empty: none. Any thread.
  std::vector<int> LostWorkers();
  // After the change of workers that dropped them: the lost workers are
  // forgotten (their ranks are others' now). Any thread.
  void ForgetLostWorkers();
  // Workers, once they know the step their training starts at (0, or the
  // checkpoint's): a question of where this worker is that came before is
  // answered with it, so a change of shape asked for right after a resume
  // stops at that step, not at 0. Any thread. `rest_from`: as BeginStep's
  // next_rest_from, for `step`.
  void StartingAt(int64_t step, int64_t rest_from = -1);

  // 14. Workers, after BeginStep(step): the server count the job changes to
  // before this step (the scheduler's Stop with servers), once; 0: none.
  // *slots: for each rank of the new placement, the rank its server holds
  // now (empty: the ranks below the count keep theirs).
  int GrowsAt(int64_t step, std::vector<int>* slots);
  // 16. Workers, after BeginStep(step): the live change of workers the job
  // makes before this step (the scheduler's Stop with workers), once;
  // workers 0: none. ranks[r]: the rank worker r holds after it (-1: it
  // leaves). This worker takes its new rank when the topology of the new
  // shape comes.
  struct WorkersChange {
    int64_t at_step = -1;
    int workers = 0;
    std::vector<int> ranks;
  };
  WorkersChange WorkersChangeAt(int64_t step);
  // 16. This worker is at the change's step: the topology of the new shape
  // that comes from now on gives it its new rank. Any thread.
  void EnterWorkersChange();
  // 16. The chief, once every worker is at `step`: the scheduler renumbers
  // the workers there, admits the joiners and answers.
  Status ReportWorkersAt(int64_t step, int workers);
  // 16. After the change: waits (up to twice the heartbeat timeout) until
  // the new topology gave this worker `rank` of `workers`.
  Status AwaitRank(int rank, int workers);
  // 16. This worker left the job in a live change: it is no member to
  // report Done (the scheduler sends it off). Any thread.
  void LeftLive() { left_live_ = true; }
  // 14. Servers: this server holds `rank` in the new placement of a live
  // change (the chief's take-over says so; the topology that follows lists
  // it there). Any thread.
  void AdoptRank(int rank);
  // The chief, once the job runs with `servers` servers from `step` on.
  Status ReportShapeChanged(int64_t step, int servers, int partitions);
  // This node joined a running elastic job live (RegisterReply live): no
  // checkpoint to resume, no start barrier.
  bool joined_live() const { return joined_live_.load(); }

  // Workers: the steps done and the training rate, sent with the next
  // heartbeats for the scheduler's live view. Any thread; never blocks.
  void ReportProgress(int64_t step, double samples_per_s);
  // The chief: its measure of the validation set at the end of `epoch`,
  // sent with the next heartbeats (`metric`: "auc", "accuracy", ...).
  // Any thread; never blocks for long.
  void ReportValidation(int epoch, const std::string& metric, double value);
  // A server of a replicated job: its backups hold all it holds as of
  // server view `view`. Told the scheduler at once, and with each heartbeat.
  void ReportReplicasHeld(int64_t view);

  // Whether the scheduler still counts this node in, as far as this node
  // can tell: false after a pause or verdict, and after this node's loop
  // stalled long enough that its heartbeats may have stopped for the
  // timeout (a SIGSTOP), or it heard nothing from the scheduler for the
  // timeout (a cut): then until the scheduler answers a heartbeat sent
  // after that, or this node registers with it again. A scheduler that
  // merely went away (restarted) is no doubt. A server of a replicated job
  // serves workers only while this holds: its backup may have taken its
  // rows over (roles/server/request_fence.h). Loop thread.
  bool CountedIn();
  int rank() const { return rank_.load(); }  // valid after Join
  // The topology as last received (deltas applied); null before. Loop
  // thread only.
  const Topology* topology() const { return topology_ ? &*topology_ : nullptr; }
  // Across a rollback (roles/node/recovery.h): before Join, the topology an
  // earlier run of this node acknowledged last, which the scheduler's deltas
  // are applied to; Held(), from any thread, the one this run holds.
  void Recall(Topology held);
  std::optional<Topology> Held();
  // After a Pause that changed an elastic job's shape: the rank and shape
  // the next run registers with. Any thread.
  struct NextRun {
    int rank = -1;
    int server_num = 0;
    int worker_num = 0;
  };
  std::optional<NextRun> next_run();
  // The job's shape as this node knows it: its options', or, in an elastic
  // job, the topology's (set on the loop thread before Join returns, and
  // before any peer could know this node's topology). Any thread.
  int server_num() const { return server_num_.load(); }
  int worker_num() const { return worker_num_.load(); }
  int64_t generation() const { return generation_.load(); }

 private:
  static uint64_t Millis(double seconds) { return static_cast<uint64_t>(seconds * 1000.0 + 0.5); }
  StatusOr<BarrierReply> EnterBarrier(BarrierRequest request);
  void TryConnect();
  void OnConnected(Connection::Ptr conn);
  void OnRegistered(StatusOr<Incoming> reply);
  void OnRequest(const Connection::Ptr& conn, Incoming&& in);
  void OnTopology(const Connection::Ptr& conn, uint64_t id, const Topology& topology);
  void OnSchedulerLost(const Status& reason);
  void CheckSchedulerHeard();
  // Whether this check came so late that this node's loop must have stalled
  // (the scheduler's rule, roles/scheduler/scheduler.h step 4); if so, the scheduler
  // gets a fresh timeout.
  bool NoticeStall(uint64_t now, uint64_t timeout);
  // This node's heartbeat: its progress and the view its backups hold.
  Heartbeat CurrentHeartbeat() const;
  // After a stall: asks the scheduler whether it still counts this node in
  // (CountedIn is false until it answers).
  void DoubtStanding();
  // The end of this node's part: set once, then interrupt the node.
  void SetVerdict(const Status& verdict);
  // Calls made while reconnecting wait here; sent (or failed) once that ends.
  void CallWhenConnected(MessageBody body, Connection::ReplyCallback done);
  void FlushWaitingCalls(const Status& failed);
  StatusOr<Incoming> CallScheduler(MessageBody body, const std::string& what);
  std::string SchedulerAddress() const;

  EventLoop* loop_;
  NodeOptions options_;
  Logger log_;
  std::function<void(const Status&)> interrupt_;
  RequestHandler role_requests_;
  uint16_t listen_port_ = 0;
  std::atomic<int> rank_{-1};
  std::atomic<int64_t> generation_{0};
  std::atomic<int> server_num_, worker_num_;
  std::atomic<bool> paused_{false};
  std::atomic<bool> joined_live_{false};
  std::atomic<bool> left_live_{false};          // 16. LeftLive
  std::atomic<bool> in_workers_change_{false};  // 16. EnterWorkersChange
  std::atomic<int64_t> progress_step_{-1};      // ReportProgress, read by the loop
  std::atomic<double> progress_rate_{0};
  mutable Mutex validation_mutex_;  // ReportValidation, read by the loop
  Heartbeat validation_ GUARDED_BY(validation_mutex_);
  std::atomic<int64_t> held_view_{-1};

  // Loop-thread state.
  Connection::Ptr scheduler_;
  std::optional<Topology> topology_;
  Timer retry_timer_{loop_};
  Timer heartbeat_timer_{loop_};
  uint64_t connect_deadline_ms_ = 0;
  uint64_t last_heard_ms_ = 0;
  StallWatch stall_watch_;  // of CheckSchedulerHeard
  Status last_connect_error_;
  bool joined_once_ = false;  // registered at least once: a loss means rejoin
  bool rejoining_ = false;
  bool doubted_ = false;        // DoubtStanding asked, not yet answered
  uint64_t doubts_ = 0;         // questions DoubtStanding asked
  bool done_reported_ = false;  // re-sent after a rejoin
  std::vector<std::pair<MessageBody, Connection::ReplyCallback>> waiting_calls_;

  // The stop gate (BeginStep), shared by the loop and the training thread.
  Mutex stop_mutex_;
  CondVar stop_changed_;
  int64_t steps_started_ GUARDED_BY(stop_mutex_) = 0;
  int64_t rest_from_ GUARDED_BY(stop_mutex_) = -1;  // of step steps_started_
  int64_t stop_at_ GUARDED_BY(stop_mutex_) = -1;    // stop before this step
  bool hold_ GUARDED_BY(stop_mutex_) = false;       // asked, answer pending
  bool started_ GUARDED_BY(stop_mutex_) = false;    // StartingAt came
  int64_t grow_at_ GUARDED_BY(stop_mutex_) = -1;    // GrowsAt
  int grow_servers_ GUARDED_BY(stop_mutex_) = 0;
  std::vector<int> grow_slots_ GUARDED_BY(stop_mutex_);
  std::vector<int> lost_workers_ GUARDED_BY(stop_mutex_);
  int64_t lost_step_ GUARDED_BY(stop_mutex_) = -1;  // AwaitLostStep
  int64_t lost_from_ GUARDED_BY(stop_mutex_) = -1;  // LostFrom
  WorkersChange change_ GUARDED_BY(stop_mutex_);    // WorkersChangeAt
  // 16. The rank this worker takes once the topology lists `workers_after_`
  // workers (-1: none pending). Loop thread.
  int rank_after_ = -1;
  int workers_after_ = 0;
  // Asked where it is before StartingAt: answered then (loop thread).
  std::weak_ptr<Connection> asked_conn_ GUARDED_BY(stop_mutex_);
  uint64_t asked_id_ GUARDED_BY(stop_mutex_) = 0;
  void OnStop(const Connection::Ptr& conn, uint64_t id, const Stop& stop);
  void StartingAtLocked(int64_t step, int64_t rest_from) REQUIRES(stop_mutex_);
  void ReleaseHold();

  // A copy of topology_ for Held(): the node keeps it across a rollback.
  Mutex held_mutex_;
  std::optional<Topology> held_ GUARDED_BY(held_mutex_);
  std::optional<NextRun> next_run_ GUARDED_BY(held_mutex_);

  Completion<StatusOr<Topology>> joined_;
  Completion<Status> verdict_;
};

}  // namespace pstrain
