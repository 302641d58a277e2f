// Server: holds its share of the PS-managed partitions (see
// comm/ps/partition_map.h for which) and answers the workers.
//
// Peer protocol (messages in comm/transport/wire.fbs), worker -> server:
//   1. Hello: a worker introduces itself.                      reply: Ack
//   2. PushRequest(kind Init) + values: the chief's initial values of a
//      partition; the first Init creates it, later ones are acknowledged
//      and ignored (values restored from a checkpoint win).  reply: Ack
//   3. PushRequest(kind Gradient, clock) + gradient: applied as the mode
//      says (roles/server/partition.h).            reply: Ack, or Error naming why
//      encoding Threshold: the payload is one threshold message for the
//      partition (optim/threshold_codec.h), checked whole and decoded to a
//      dense gradient first; a bad one is an Error and changes nothing.
//      A momentum tensor's messages carry the workers' momentum, so its
//      partitions run sgd (CorrectedOptimizerFor, optim/momentum_correction.h).
//      kind Delta (mode average only): a worker's weight change for round
//      `clock`, gathered like a sync step and added as the workers' mean.
//      kind ClipScale (train.clip_norm): step `clock`'s factor, one float,
//      applied to the held step (roles/server/update_core.h).
//   4. PullRequest(min_clock): answered once the partition exists and its
//      clock has reached min_clock.     reply: PullReply(clock) + values
//      With `norm` (train.clip_norm): once step min_clock is gathered
//      whole.                        reply: PullReply(squared_norm), no values
//   5. SaveRequest(step, dir): write this server's shard of a checkpoint.
//                                                        reply: SaveReply
//   6. SparsePullRequest / SparsePushRequest: rows of the embedding tables
//      this server holds a share of (roles/server/table_host.h); with
//      train.clip_norm also a norm pull (`norm`, no ids) and a factor (a
//      push with `clip`, no rows), as 3. and 4. (roles/server/table_clip.cc).
//   7. From the chief: HandOffRequest and TakeOverRequest move a partition
//      to another server while the job runs (roles/server/handoff.h); a push
//      or pull of a partition handed off is answered Moved.
//   8. From the scheduler: LoseWorker, a worker of a sync elastic job was
//      lost; the step under way finishes without it on every partition and
//      table (roles/server/worker_changes.cc).
//  10. From another server, with train.replication: Hello as a server,
//      then Replicate, a change of a partition this server backs up
//      (roles/server/replication.h).
//   9. From the scheduler: ChangeWorkers, a live change of an elastic job's
//      workers: from its step every partition and table counts the new set,
//      and each worker connection speaks for its new rank
//      (roles/server/worker_changes.cc).
// The loop thread only routes: each partition belongs to one shard thread
// (PsShard), which does the math and sends the reply.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "roles/checkpoint/shard_file.h"
#include "roles/checkpoint/store.h"
#include "roles/node/node.h"
#include "roles/placement/server_tables.h"
#include "roles/server/handoff.h"
#include "roles/server/metrics.h"
#include "roles/server/replication.h"
#include "roles/server/request_fence.h"
#include "roles/server/shard.h"
#include "src/common/checkpoint_file.h"
#include "src/common/config/config.h"

namespace pstrain {

class TableHost;  // roles/server/table_host.h

class Server {
 public:
  Server(NodeOptions options, Logger log, Config config = {});
  ~Server();
  // Runs the server's part of the job; blocks until it is over.
  Status Run();
  // After Run(): the job was paused, and this node must be rebuilt and
  // rolled back (roles/node/recovery.h).
  bool paused() const { return node_.paused(); }
  int rank() { return node_.cluster().rank(); }
  // Across rollbacks (roles/node/recovery.h): before Run(), what the run
  // before this one kept; after it, what this one keeps.
  void Recall(NodeMemory memory) { node_.Recall(std::move(memory)); }
  NodeMemory Kept() { return node_.Kept(); }

 private:
  Status RunOnce();
  void MakeShards();
  void OnPeerRequest(const Connection::Ptr& conn, Incoming&& in);
  // Why `conn` may not make this request (empty: it may).
  std::string Refusal(const Connection::Ptr& conn, const MessageBody& body);
  void OnHello(const Connection::Ptr& conn, uint64_t id, const Hello& hello);
  // Replication (roles/server/replication.h): a server whose partitions
  // this one backs up says Hello; its changes; this server's own backups.
  std::string ServerHelloRefusal(const NodeInfo& who);
  void OnReplicate(const Connection::Ptr& conn, uint64_t id, Replicate& change, Buffer payload);
  Status ConnectBackups(const Topology& topology);
  // A change of a table's share whose rows `origin`'s placement holds, from
  // the server holding them (`primary`).
  void OnTableReplica(const Connection::Ptr& conn, uint64_t id, int primary, Replicate& change,
                      Buffer payload);
  // A view's part for tables: as PsShard::ApplyView.
  void ApplyTableView(const ServerView& view, const std::vector<int>& primaries);
  // Sends a change through the backup links (train.replication).
  ReplicaSender ToBackups();
  // A copy no longer held, destroyed off the loop.
  void DropTables(std::shared_ptr<TableHost> host);
  // The tables of `origin`'s rows this server answers for (-1: its own);
  // null when none. Loop thread.
  TableHost* TablesOf(int origin);
  // Every table host this server is primary of; loop thread.
  std::vector<TableHost*> PrimaryTables();
  void RefuseTables(const Connection::Ptr& conn, uint64_t id, int origin);
  // Whether the view leaves this server's own rows with it (not so for
  // one that joined again as a backup); loop thread.
  bool OwnsOwnTables();
  // The scheduler's new view of the live servers (roles/scheduler/
  // promotion.cc): the heir of a lost server takes over its partitions,
  // every server drops the copies it no longer backs up, then links to its
  // backups of this view and sends them every partition's state.
  void OnServerView(const Connection::Ptr& conn, uint64_t id, const ServerView& view);
  // Whether a worker's request waits until the scheduler vouches for this
  // server (roles/server/request_fence.h); true: it took `in`.
  bool Fenced(const Connection::Ptr& conn, Incoming& in);
  // Made before the node starts; the verdict drops what waits.
  void MakeFence();
  // A link to a backup closed: linked again and every state sent again,
  // unless a new view came meanwhile (the backup was lost). Loop thread.
  void OnBackupLinkClosed(int backup, const Status& why);
  void Rereplicate(const ServerView& view);
  // At the end: a fingerprint of this server's partitions and of each
  // primary's it backs up, and the bytes sent to backups.
  void LogReplicas();
  void LogTableReplicas();
  void OnSave(const Connection::Ptr& conn, uint64_t id, const SaveRequest& save);
  // Live moves of a partition (roles/server/handoff.h, roles/server/handoff.cc).
  void OnHandOff(const Connection::Ptr& conn, uint64_t id, const HandOffRequest& request);
  void OnTakeOver(const Connection::Ptr& conn, uint64_t id, const TakeOverRequest& request,
                  const Buffer& payload);
  // Why `conn` may not ask for a move (empty: it may): only the chief
  // worker moves partitions and rows; `what`: "moves rows".
  std::string ChiefOnly(const Connection::Ptr& conn, const char* what) const;
  // Live moves of table rows (roles/server/table_moves.h).
  void OnRowsHandOff(const Connection::Ptr& conn, uint64_t id, const RowsHandOffRequest& request);
  void OnRowsTakeOver(const Connection::Ptr& conn, uint64_t id, const RowsTakeOverRequest& request,
                      Buffer rows);
  void OnRowsDigest(const Connection::Ptr& conn, uint64_t id);
  // A lost worker of a sync elastic job.
  void OnLoseWorker(const Connection::Ptr& conn, uint64_t id, const LoseWorker& request);
  // A live change of workers (roles/server/worker_changes.cc).
  void OnChangeWorkers(const Connection::Ptr& conn, uint64_t id, const ChangeWorkers& change);
  // The worker that checkpoints and moves: 0, or the lowest rank not lost.
  // Loop thread.
  int ChiefRank() const;
  // The shard (tensor, part) is routed to, or null (no route made).
  PsShard* RouteOf(const std::string& tensor, uint32_t part);
  // The shard of (tensor, part); null when the server already routes
  // kMaxRoutes partitions (a peer naming ever new ones must not exhaust
  // its memory).
  PsShard* ShardFor(const std::string& tensor, uint32_t part, int64_t bytes);
  void RefuseNewPartition(const Connection::Ptr& conn, uint64_t id, const std::string& tensor,
                          uint32_t part);
  PsShard::Reply ReplyTo(const Connection::Ptr& conn, uint64_t request_id);
  // Checkpoints (roles/checkpoint/shard_file.h): write this server's shard of `step`;
  // at start, restore this server's shard of `checkpoint` (found by
  // ResumeCheckpoint; step 0: nothing to restore).
  // `servers`: the shard's job shape as the chief's SaveRequest says (0: this
  // server's own count).
  // `origin`: whose partitions, as that rank's file (-1: this server's).
  void Save(int64_t step, int servers, int origin, PsShard::Reply reply);
  Status RestoreCheckpoint(const CheckpointRef& checkpoint);
  std::vector<PsShard*> AllShards();
  // For the metrics file (roles/server/metrics.h); any thread.
  ServerSample Sample();
  ShardMeta Meta();

  Config config_;
  Node node_;
  // Declared before the shards: a snapshot still queued on a shard when the
  // shards join may hand its file to this thread.
  // The store checkpoints' checksums, known per file (io_thread_ only).
  StoreDigests store_digests_;
  WorkThread io_thread_;  // writes checkpoint files off the loop and the shards
  // Links to the servers backing this one up (train.replication); before
  // the shards, which send through them until they join.
  std::unique_ptr<BackupLinks> backup_links_;
  std::unique_ptr<RequestFence> fence_;  // train.replication: loop thread
  int64_t copies_made_ = 0;              // of other servers' tables; loop thread
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> newest_view_{0};
  // Declared after node_: the destructor stops the loop first (no more
  // requests reach the shards), then the shards join (their last replies
  // are dropped by the stopped loop), then the node goes.
  std::vector<std::unique_ptr<PsShard>> shards_;
  // Owns the small partitions, on the loop thread: for them a hand-off to a
  // shard thread (two thread switches) costs far more than the update.
  std::unique_ptr<PsShard> loop_shard_;
  // The server-held embedding tables (none unless the config has some);
  // made in Run(), before any worker may send to them.
  std::unique_ptr<TableHost> tables_;
  // Replicated tables (roles/server/server_replication.cc), loop thread
  // only: the copies this server holds as a backup, by the rank whose rows
  // they are (`primary`: the server that sends their changes), and the
  // tables of lost servers this one holds now, by their rank.
  struct TableCopy {
    int primary = -1;
    std::shared_ptr<TableHost> host;
  };
  std::map<int, TableCopy> table_copies_;
  std::map<int, std::shared_ptr<TableHost>> taken_tables_;
  // Which shard owns each (tensor, part); loop thread only.
  using RoutesOfTensor = std::map<uint32_t, PsShard*>;
  std::map<std::string, RoutesOfTensor, std::less<>> routes_;
  size_t route_count_ = 0;
  // The partitions this server handed off, and to whom; loop thread only.
  MovedPartitions moved_;
  // Whether the shards and tables are made; until then Hellos wait for
  // their Ack in early_hellos_. Loop thread only.
  bool ready_ = false;
  // It gave all its table rows up in a live change (it leaves); loop only.
  bool left_placement_ = false;
  std::vector<std::pair<Connection::Ptr, uint64_t>> early_hellos_;
  // The worker rank each peer connection introduced itself as (Hello);
  // loop thread only. Requests name their worker, which must match.
  std::unordered_map<const Connection*, int> worker_of_;
  // The server rank each connection from a primary introduced itself as;
  // loop thread only.
  std::unordered_map<const Connection*, int> primary_of_;
  ServerView view_;  // the newest the scheduler sent; loop thread only
  // One that came before the shards were made, taken once they are.
  struct EarlyView {
    Connection::Ptr conn;
    uint64_t id = 0;
    ServerView view;
  };
  std::optional<EarlyView> early_view_;
  // Links again and sends the states of a new view, off the loop; it stops
  // waiting once the server stops or a newer view came.
  WorkThread replica_thread_;
  std::set<int> lost_workers_;  // loop thread: ranks lost mid-step (LoseWorker)
  // Steps the job has reached as this server saw them (clocks of pushes and
  // pulls, the restored checkpoint): a checkpoint of a later step is refused.
  std::atomic<int64_t> reached_step_{0};
  bool heard_steps_ = false;  // loop thread only
  // Gradient pushes received (dense and table rows), for the metrics file.
  std::atomic<int64_t> updates_{0};
  std::vector<std::string> table_names_;  // set before the start barrier
};

}  // namespace pstrain
