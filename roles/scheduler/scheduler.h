// Scheduler: the rendezvous point of a job, and the judge of lost nodes.
//
// Protocol (messages in comm/transport/wire.fbs), all on the scheduler's loop thread:
//   1. A node connects (the connection's handshake proved MS_CLUSTER_TOKEN,
//      comm/transport/handshake.h) and sends RegisterRequest (node id, role, advertised
//      host and port, the rank it asks for or -1, the cluster shape it was
//      started with, its config's recovery wait).
//   2. The scheduler checks the shape and gives the node a
//      rank: the one it asked for (refused if another node holds it), its
//      old one if its node id is known, else the lowest free rank of its
//      role. It logs
//        The <role> node id:<id>,node ip: <ip>,node port:<port> assign rank id:<r>
//      and replies RegisterReply(rank, generation).
//   3. When every rank of both roles is held, every node gets its Topology:
//      the job's shape and the peers it talks to (roles/node/peers.h: a
//      worker every server and its ring neighbours, a server no one), so
//      that the bytes grow with workers x servers, not with the square of
//      the nodes. When it comes again (5, 9), a node that acknowledged an
//      earlier one gets a delta from it: the new generation and the peers
//      whose entry (node id, host, port) changed since, which it patches its
//      list with; a node the scheduler knows no acknowledged list of (a new
//      node id on a rank, a restarted node, one that did not answer its
//      last), or that refuses the delta, gets the whole list. The scheduler
//      logs
//        Start the scheduler node is successful!
//      Not all in within PSTRAIN_REGISTER_TIMEOUT: the job ends, naming the
//      missing ranks and the refused nodes.
//   4. Heartbeats go both ways every interval. A node silent past the
//      timeout, a node whose connection closes, or a known node id that
//      registers again while the job runs (it restarted, its state is gone)
//      is a lost node, logged with role and rank.
//   5. A lost node with recovery (train.recovery, on with checkpoints):
//      the generation goes up and every other node gets Pause; each drops
//      all its state and registers again (same node id, same rank). The
//      lost rank goes to a node registering with the lost node id, or to any
//      new node. When every rank is held again, each node's Topology (new
//      generation) goes out and every node resumes from the newest complete
//      checkpoint. No replacement within the wait: the job ends.
//      Without recovery the job ends at once. A node that lost a peer it
//      still should reach reports NodeFailed naming it: the job rolls back
//      the same way (no replacement needed), but when the same link fails
//      again with no progress in between (no worker past the furthest step
//      any reached) more than train.recovery.max_failed_link_rollbacks times
//      in a row, the job ends naming the pair that cannot reach each other.
//      A scheduler whose own loop stalled (its heartbeat check came late by
//      more than half the timeout: SIGSTOP, a paused machine, a starved
//      CPU) has not read what came meanwhile: it gives every node a fresh
//      timeout instead of judging it, and a node that closed its connection
//      to it meanwhile (it thought the scheduler lost) may rejoin (9)
//      within the timeout.
//   6. Ending a job (a lost node without recovery, a node's NodeFailed, a
//      deadline): every node gets Shutdown(reason, failed), logs the reason
//      and exits 1.
//   7. BarrierRequest(group, value): the reply goes to every member of the
//      group once all of them have asked; it carries the smallest value any
//      member sent (workers agree on a step count this way). A pause fails
//      every waiting barrier.
//   8. Each worker sends Done when its work is over. When all have, every
//      node gets Shutdown; once each has acknowledged (or gone away, or the
//      heartbeat timeout passed), the job is over.
//   9. A restarted scheduler (same host and port) is re-joined by the
//      running nodes: RegisterRequest with rejoin, their rank and generation.
//      Once every rank is back the Topology goes out again and the job goes
//      on; a worker that had reported Done reports it again. Knowing
//      nothing of what the nodes acknowledged, the scheduler sends a node
//      whose registration names the topology it holds (generation and
//      digest) and whose list is the same a delta of no entries.
//  10. Stopping on request: SIGTERM or SIGINT to any node (StopRequest) or
//      to the scheduler. Each worker is asked its step (Stop -1; it holds at
//      its next step boundary), then told to stop after the largest
//      (Stop N): every worker reaches it, the chief writes a checkpoint
//      when configured, all report Done and get Shutdown(stopped). Every
//      process exits 3. Before the job starts, or while it is paused, the
//      job ends at once the same way.
//  11. A node id is held by the process that registered it while that one
//      is connected: a second registration with the id (a mistake, a
//      stranger, or a restart whose old connection lingers) waits while the
//      scheduler probes the holder (Heartbeat as a call). The holder
//      answers: the newcomer is refused. No answer within the heartbeat
//      timeout: the holder is lost (4) and the newcomer registers.
//  13. An elastic job (train.elastic; roles/scheduler/elastic.cc) changes
//      shape while it runs: a node that registers while the job is below
//      its maximum joins it; `pstrain scale` (ScaleRequest) asks for a shape,
//      and the nodes beyond it leave; SIGTERM to a node (StopRequest with
//      leave) makes it leave; a lost node above the minimum is dropped
//      instead of awaited. A join or leave holds the workers as stopping
//      does (10) and stops them after the furthest step S, where the chief
//      writes a checkpoint; then the leaving nodes get Shutdown (they exit
//      0), the others Pause with their new rank and the new shape (ranks
//      stay 0..n-1 in their old order, joiners after them), the joiners
//      their rank, and all resume from step S: nothing is redone. A lost
//      node's step under way cannot finish, so its drop resumes from the
//      newest checkpoint (a rollback). Each change is one log line:
//        elastic: workers 2 -> 3, servers 2 -> 2 from step S: <nodes and why>
//  14. In a job whose train.elastic sets server bounds, servers join and
//      leave live (a leaver's rank goes to the highest server that stays): joiners are admitted at
//      once (RegisterReply live: no checkpoint, no start barrier) and appear in the topology; the
//      workers are held as in 10 and told Stop(S, servers): at step S they
//      connect to new servers, the chief moves the partitions and table
//      rows the new count places elsewhere (roles/worker/grow.h,
//      roles/server/handoff.h, roles/server/table_moves.h), the
//      workers drop leavers, and the chief sends ShapeChanged; only then do
//      leavers get Shutdown. Nothing pauses, no checkpoint is written, and
//      the change's line ends "(live: ...)".
//  15. A lost worker of a sync elastic job on the CPU: the others finish
//      the step under way without it (roles/scheduler/lost_worker.cc).
//  16. In such jobs, and in async and ssp ones, workers join and leave live
//      (roles/scheduler/live_workers.cc): at the step S every worker
//      reaches, the servers and the scheduler renumber the workers, the
//      joiners are admitted, and the workers rebuild their ring and split
//      the rest of the epoch anew. Nothing pauses, no checkpoint is written.
//  17. A job with train.replication (roles/scheduler/promotion.cc): a lost
//      server's partitions are held by its first live backup, its heir.
//      Every live server, then every worker, gets a ServerView naming the
//      live servers and who holds each one's partitions; the workers send
//      what the lost server had not answered to the heir, and the servers
//      link to their new backups. Nothing pauses or rolls back, and no
//      checkpoint is needed. Its line:
//        lost server <r>: server <h> holds its partitions now (view <v>): no
//        step is redone
//  12. With PSTRAIN_HTTP_PORT, the live view: GET /status (JSON) and GET
//      /metrics (Prometheus text) on the scheduler's host, served on this
//      loop from the state below (roles/scheduler/view.h). Workers' steps
//      and rates come with their heartbeats.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/http/http_server.h"
#include "comm/transport/completion.h"
#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/listener.h"
#include "comm/transport/signal_watcher.h"
#include "comm/transport/timer.h"
#include "roles/node/stall_watch.h"
#include "roles/scheduler/view.h"
#include "src/common/config/options.h"
#include "src/common/logging.h"

namespace pstrain {

class Scheduler {
 public:
  Scheduler(ClusterOptions options, Logger log);
  ~Scheduler();

  // Listens on options.sched_host:sched_port (port 0: any free port) and
  // starts serving. Returns the bound port.
  StatusOr<uint16_t> Start();
  // Blocks until the job is over; OK when every worker finished.
  Status Wait();
  // Ends the job now with `reason`: every node loses its connection and stops
  // with an error. Any thread.
  void Abort(const std::string& reason);

 private:
  static uint64_t Millis(double seconds) { return static_cast<uint64_t>(seconds * 1000.0 + 0.5); }
  // One rank of one role. Empty node id: never held.
  struct NodeEntry {
    NodeInfo info;
    std::weak_ptr<Connection> conn;
    uint64_t last_heard_ms = 0;
    int64_t generation = -1;  // the generation it registered for
    bool lost = false;        // its node is gone: any new node may take the rank
    bool done = false;        // worker reported Done
    bool shut_down = false;   // acknowledged Shutdown or gone
    int64_t step = -1;        // 12. a worker's last reported step and rate
    double samples_per_s = 0;
    Heartbeat validation{};  // the chief's last validation measure (validation -1: none)
    // 17. A server's: the newest server view for which its backups hold
    // all it holds (-1: none yet; 0: the tables' states sent at the start).
    int64_t held_view = -1;
    bool awaiting_rejoin = false;  // 4. its connection closed during a stall of ours
    // 3. The topology round in which this rank's entry (node id, host,
    // port) last changed; the last round this node acknowledged (0: none,
    // or not known) and that round's generation.
    uint64_t entry_changed_round = 0;
    uint64_t acked_round = 0;
    int64_t acked_generation = -1;
    // 3. The topology it said it holds when it registered (-1: none), for
    // when the scheduler knows no acknowledged one (9: a restarted scheduler).
    int64_t claimed_generation = -1;
    uint64_t claimed_digest = 0;
  };
  // 11. A registration naming a live node's id, waiting on a probe of it.
  struct HeldRegistration {
    std::weak_ptr<Connection> conn;
    uint64_t request_id;
    RegisterRequest req;
    uint64_t since_ms;
    uint64_t probe;
  };
  struct BarrierWaiter {
    std::weak_ptr<Connection> conn;
    uint64_t request_id;
    std::string node_id;
    int rank;
    int64_t value;
    std::string blob;
  };

  void OnAccept(Connection::Ptr conn);
  // 12. The live view (roles/scheduler/http.cc).
  Status ServeHttp();
  HttpResponse OnHttp(const HttpRequest& request);
  JobView View();
  void OnRequest(const Connection::Ptr& conn, Incoming&& in);
  void OnClose(const Connection::Ptr& conn, const Status& reason);
  void HandleRegister(const Connection::Ptr& conn, uint64_t id, const RegisterRequest& req);
  // Answers `group`'s barrier once all its members are in (GroupSize; a
  // live change of workers changes it with members waiting).
  void ReleaseIfComplete(BarrierGroup group);
  void HandleBarrier(const Connection::Ptr& conn, uint64_t id, NodeEntry& node,
                     const BarrierRequest& request);
  void HandleDone(const Connection::Ptr& conn, uint64_t id, NodeEntry& node);
  Status CheckRegistration(const RegisterRequest& req) const;
  // The node's config against the job's (the scheduler's, else the first
  // admitted node's): one line naming the first keys that differ.
  Status CheckSameConfig(const RegisterRequest& req) const;
  void HoldForProbe(const Connection::Ptr& conn, uint64_t id, const RegisterRequest& req,
                    NodeEntry& holder, const Connection::Ptr& holder_conn);
  void ExpireProbes(uint64_t now, uint64_t timeout);
  // The rank a new node id of `role` gets, or why it gets none.
  StatusOr<int> PickRank(Role role, int requested) const;
  void Admit(const Connection::Ptr& conn, uint64_t id, NodeInfo info, const char* how,
             const RegisterRequest& req);
  // 3. The Topology of each node, at most kTopologyEntriesInFlight entries
  // (about 15 MB of frames) unanswered at once.
  struct TopologyRound {
    uint64_t number = 0;                      // rounds counted from 1
    std::vector<std::pair<Role, int>> nodes;  // who gets one, in order
    size_t next = 0;
    size_t in_flight = 0;  // entries of the frames unanswered
    bool pumping = false;
  };
  static constexpr size_t kTopologyEntriesInFlight = size_t{1} << 18;
  void SendTopology();
  void PumpTopology(const std::shared_ptr<TopologyRound>& round);
  // Sends `role` rank `rank` its Topology of `round`: a delta where it can
  // (3), the whole list when `whole`.
  void SendTopologyTo(const std::shared_ptr<TopologyRound>& round, Role role, int rank, bool whole);
  Topology TopologyFor(const NodeEntry& node, bool whole) const;
  // 3. What the rank's new holder `after` holds of its earlier topologies,
  // and whether its entry changed for its peers, given the holder `before`.
  void CarryTopologyRecord(const NodeEntry& before, NodeEntry* after) const;
  void CheckHeartbeats();
  // 4. Whether this heartbeat check came so late that the loop must have
  // stalled; if so, every node gets a fresh timeout.
  bool NoticeStall(uint64_t now, uint64_t timeout);
  // 5. A recoverable failure of the link between `reporter` and the peer
  // `failed` names: true when that link has failed too often in a row with
  // no progress, and the job was ended.
  bool GiveUpOnLink(const NodeEntry& reporter, const NodeFailed& failed, const std::string& what);
  // 4-5: a node is gone; pause (recovery) or end the job.
  void LoseNode(NodeEntry& node, const std::string& why);
  // `reshape`: an elastic job changes shape (13): every node gets its rank
  // and the new shape, and no replacement is awaited.
  void BeginPause(const std::string& why, bool reshape = false);
  void BeginStop(const std::string& why);
  // A stop on request that waited for a live change of workers (16) goes
  // ahead, once it is done or called off.
  void StopIfAsked();
  // 10, 13. Asks every worker its step (but a lost one of 15), holding it
  // at its next boundary, then calls `then` with the furthest (or why one
  // did not answer), unless the job was paused meanwhile.
  struct WorkersWhere {
    int64_t furthest = 0;
    int64_t rest_from = -1;  // at the furthest: StopReply's (-1: unknown)
  };
  void AskWorkersWhere(const std::string& why,
                       std::function<void(const Status&, const WorkersWhere&)> then);
  void StopAt(int64_t step, const std::string& why);
  // 13. Elastic jobs (roles/scheduler/elastic.cc).
  static std::string DescribeBounds(const ElasticBounds& bounds);
  // A new node registered while the elastic job runs and no rank is free:
  // it waits to join at the next change (or is refused past the maximum).
  void QueueJoiner(const Connection::Ptr& conn, uint64_t id, const RegisterRequest& req,
                   NodeInfo info);
  // SIGTERM to `node`: false when it cannot leave (the job is at its minimum).
  bool Leave(NodeEntry& node, const std::string& why);
  void HandleScale(const Connection::Ptr& conn, uint64_t id, const ScaleRequest& request);
  // Starts the next change when the job runs and none is under way.
  void MaybeReshape();
  // 14. Servers joining a job with server bounds join live: admitted at
  // once, the workers grow to them at a step every worker reaches and the
  // chief moves partitions and table rows to them (roles/worker/grow.h);
  // no checkpoint, no pause.
  bool CanGrowLive() const;
  bool CanShrinkLive() const;
  void ShrinkLive();
  // Has the chief copy ahead the table rows that move (roles/worker/
  // rows_ahead.h), then HoldForServers. `slots`: for each rank of the new
  // placement, the server's rank now (empty: ranks below `servers` stay).
  void ChangeServersLive(int old_servers, int servers, const std::string& why,
                         std::vector<int> slots = {});
  // Holds the workers and tells them to go on with `servers` servers at
  // the step they all reach; logs the change.
  void HoldForServers(int old_servers, int servers, const std::string& why, std::vector<int> slots);
  // Shutdown to nodes that left the job after `step`; they exit 0.
  void SendOff(const std::vector<NodeEntry>& left, int64_t step);
  // Holds every worker at its next step boundary (as stopping does) and
  // calls `then` with the furthest step once all have said where they are.
  void HoldForChange(const char* what, const std::string& why,
                     std::function<void(int64_t furthest)> then);
  void GrowLive();
  // The chief's ShapeChanged: the live growth is done.
  void HandleShapeChanged(const Connection::Ptr& conn, uint64_t id, const ShapeChanged& changed);
  // Every worker stopped at reshape_step_: apply the change.
  void ApplyReshape();
  // A lost node of an elastic job above its minimum: true when dropped.
  bool DropLost(NodeEntry& node, const std::string& what);
  // 17. A lost server of a replicated job: true when its heir takes over
  // (roles/scheduler/promotion.cc).
  bool PromoteBackups(NodeEntry& node, const std::string& what);
  // A server's backups hold all it holds as of view `view`; once every
  // live server's do for the newest view, the log says so.
  void NoteReplicasHeld(NodeEntry& node, int64_t view);
  // Sends `view` to every live server, then, once they took it, to every
  // worker.
  void SendServerView(const ServerView& view);
  // 17. A server registering for a lost rank of a replicated job joins the
  // running job live, holding nothing: the next view makes it live again,
  // and the servers it now backs up send it their partitions.
  void JoinAsBackup(const Connection::Ptr& conn, uint64_t id, NodeInfo info,
                    const RegisterRequest& req);
  // 15. A lost worker the job goes on without, live: true when that is
  // under way. GoOnWithoutLost: its last push was of step `last`, and the
  // others drop it at step `at`.
  bool FinishWithoutLost(NodeEntry& node, const std::string& what);
  void GoOnWithoutLost(const std::string& node_id, int rank, int64_t last, int64_t at,
                       const std::string& why);
  // 15. Every server's answer to `request`: the largest last_step of their
  // LoseWorkerReply (-1: none), or the first error.
  void AskServers(LoseWorker request, std::function<void(const Status&, int64_t)> then);
  // 15. A pause came while a lost worker's step was being finished: it is
  // dropped as in 13 (the job resumes from the newest checkpoint).
  void ForgetLiveLoss(const std::string& why);
  struct Joiner;  // a node waiting to join (below)
  // 16. Workers joining and leaving a job on the CPU do so live
  // (roles/scheduler/live_workers.cc): no checkpoint, no pause.
  bool CanChangeWorkersLive() const;
  void ChangeWorkersLive();
  // Sets the change's ranks (the workers not in `leavers` keep their
  // order, the joiners come after them) and returns who moves, for its line.
  std::string PlanLiveWorkers(std::set<std::string> leavers, std::vector<Joiner> joining);
  // The change's "elastic:" line, at `step`.
  void LogLiveWorkers(int old_workers, int64_t step, const std::string& who);
  // The chief's ShapeChanged with workers: every worker is at the step.
  void FinishWorkersLive(const Connection::Ptr& conn, uint64_t id, const ShapeChanged& changed);
  // The servers renumbered their workers: so does the scheduler.
  void ApplyWorkersLive(int64_t step);
  // A change of workers that did not happen: its joiners wait for the next.
  void RequeueLiveJoiners();
  // `request` to every server; `each` with every answer that is not an
  // error, then `then` with the first error, or OK once all answered.
  void CallServers(MessageBody request, std::function<void(const Status&)> then,
                   std::function<void(const Incoming&)> each = nullptr);
  // Rebuilds `role`'s ranks: the nodes `keep` accepts in rank order, then
  // `extra` empty slots. Returns the node ids that did not stay.
  std::vector<NodeEntry> Renumber(Role role, const std::function<bool(const NodeEntry&)>& keep,
                                  size_t extra);
  int Count(Role role) const {
    return static_cast<int>(role == Role::kServer ? servers_.size() : workers_.size());
  }
  int Joining(Role role) const;
  // Keeps a change's log line for /status (the last 32).
  void RecordChange(const std::string& line);
  // Tells every node waiting to join that it will not.
  void RefuseJoiners(const std::string& why);
  int Leaving(Role role) const;
  void MaybeResume();
  std::string MissingRanks() const;
  void BeginShutdown();
  // 8-9. A node that gave this scheduler up while it stalled rejoins as the
  // job ends well: it is told so (ending_) instead of refused.
  void RejoinAtShutdown(const Connection::Ptr& conn, uint64_t id, const RegisterRequest& req);
  void MaybeFinish();
  void Finish(Status status);
  std::vector<NodeEntry*> AllNodes();
  void AbortOnLoop(const Status& why);
  void EndNow(const Shutdown& shutdown, const Status& result);

  std::vector<NodeEntry>& NodesOf(Role role) { return role == Role::kServer ? servers_ : workers_; }
  NodeEntry* FindByConnection(const Connection* conn);
  std::string Describe(const NodeEntry& node) const;
  size_t GroupSize(BarrierGroup g) const;
  bool AllRegistered() const { return held_now_ == servers_.size() + workers_.size(); }
  // Whether `node` holds its rank for the current generation (held_now_
  // counts them; every change of a node's or the job's generation keeps it).
  bool HeldNow(const NodeEntry& node) const {
    return !node.info.node_id.empty() && node.generation == generation_;
  }
  void SetGeneration(int64_t generation);
  void CountHeld();  // held_now_ from scratch

  ClusterOptions options_;
  Logger log_;
  EventLoop loop_;
  Listener listener_;
  Timer heartbeat_timer_{&loop_};
  Timer shutdown_timer_{&loop_};
  Timer register_timer_{&loop_};  // registration deadline, then the pause's
  SignalWatcher signals_{&loop_};
  HttpServer http_{&loop_, log_};
  uint64_t started_ms_ = 0;
  Completion<Status> finished_;

  // Loop-thread state: the handlers that touch it begin with
  // PSTRAIN_DCHECK_ON_LOOP(&loop_) (comm/transport/event_loop.h).
  std::vector<NodeEntry> servers_, workers_;                       // index = rank, fixed size
  std::unordered_map<std::string, std::pair<Role, int>> rank_of_;  // node id -> role, rank
  std::unordered_map<const Connection*, std::string> node_of_;     // registered connections
  // 7. The requests waiting in one group's barrier, one per node.
  struct Barrier {
    std::vector<BarrierWaiter> waiters;
    std::unordered_map<std::string, size_t> slot_of;  // node id -> index in waiters
  };
  std::array<Barrier, 3> barriers_;     // by BarrierGroup
  std::vector<HeldRegistration> held_;  // 11
  uint64_t next_probe_ = 1;
  std::vector<std::string> refusals_;            // the first few, for the deadline's message
  std::optional<std::string> reference_config_;  // the job's JobConfigText
  std::string reference_name_;                   // whose it is, for messages
  int64_t generation_ = 0;                       // rollbacks so far (5)
  size_t held_now_ = 0;                          // nodes for which HeldNow()
  // Per role: every rank below it has been held (a rank once held keeps a
  // node id), so the search for a rank never held starts there.
  mutable std::array<size_t, 2> never_held_from_{};
  // 5. The link ("worker 1 and server 0") whose failure caused the last
  // rollback, and how many rollbacks in a row it caused with no progress;
  // progress: a worker past best_step_at_rollback_.
  std::string failed_link_;
  int failed_link_rollbacks_ = 0;
  int64_t best_step_ = -1;  // the furthest step any worker reported
  int64_t best_step_at_rollback_ = -1;
  StallWatch stall_watch_;                         // 4. of the heartbeat checks
  uint64_t rejoin_grace_until_ms_ = 0;             // 4. closes before this follow a stall
  std::optional<Shutdown> ending_;                 // 8. the Shutdown of a job that ends well
  double recovery_wait_s_ = 0;                     // from the nodes' registrations
  std::shared_ptr<TopologyRound> topology_round_;  // the latest SendTopology's
  uint64_t topology_rounds_ = 0;                   // SendTopology calls so far
  bool topology_sent_ = false;
  bool paused_ = false;
  bool shutting_down_ = false;
  std::string stop_reason_;  // non-empty: stopping on request (10)

  // 13. Elastic jobs.
  struct Joiner {
    std::weak_ptr<Connection> conn;
    uint64_t request_id;
    RegisterRequest req;
    NodeInfo info;
  };
  ElasticBounds elastic_;  // the nodes' train.elastic (fixed shape: disabled)
  int replicas_ = 0;       // the nodes' train.replication.replicas
  // 17. The servers' view: which are live, which holds each one's
  // partitions (empty until the first loss).
  ServerView server_view_;
  std::vector<Joiner> joiners_;                           // to join at the next change
  std::unordered_map<std::string, std::string> leaving_;  // node id -> why, at the next change
  std::vector<std::string> reshape_reasons_;              // of the change asked for
  bool reshaping_ = false;                                // workers stopping for a change
  bool admitting_live_ = false;                           // Admit answers RegisterReply live
  int64_t reshape_step_ = -1;
  std::vector<int> live_slots_;         // of the live server change under way
  std::set<std::string> live_leavers_;  // the servers it takes out
  std::set<std::string> live_lost_;     // 15. workers whose step is finished without them
  // 16. The live change of workers under way: who joins, who leaves, each
  // worker's rank after it, and the worker count.
  std::vector<Joiner> live_joiners_;
  std::set<std::string> live_worker_leavers_;
  std::vector<int> live_ranks_;
  // Counts the changes begun (HoldForChange, ChangeServersLive): an answer
  // to a copy ahead of an earlier one is ignored.
  uint64_t change_round_ = 0;
  int live_workers_ = 0;
  std::string stop_after_change_;           // a stop on request that waits for it
  std::vector<std::string> shape_changes_;  // the log lines of the changes, the last 32
};

}  // namespace pstrain
