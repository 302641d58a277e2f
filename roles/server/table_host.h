// TableHost: a server's share of every server-held embedding table
// (roles/placement/server_tables.h, embedding/sparse_table.h), answering the workers'
// SparsePullRequest and SparsePushRequest (comm/transport/wire.fbs).
//
// A row of table T with id i lives on server ServerOfId(i, servers); a
// worker sends each server only its ids, deduplicated, and names the server
// count it placed them over: after a live change of the server set
// (roles/server/table_moves.h) a request placed over another count is
// refused, never served from rows that moved.
// When a push is applied and which pulls may be answered is the rule every
// dense partition follows too (roles/server/update_core.h):
//   pull: rows for the ids, in request order (created on first touch, or
//     zeros for ids not yet admitted), once the table's clock reaches the
//     request's min_clock.
//   push (mode sync): the W workers' pushes of step c are summed per id (in
//     worker order), divided by W, and applied once; then the clock becomes
//     c + 1 and waiting pulls are answered. A worker pushes every step, with
//     no ids if it has none for this server, so the step completes.
//   push (async, ssp): applied on arrival; ssp's clock is the slowest
//     worker's pushes, as a dense partition's.
// Rows' ages (evict_after_steps) count the job's steps (UpdateCore::step).
// Counts of rows, admissions and evictions are logged every 1000 steps, and
// idle rows are dropped then.
// A table whose rule sets a memory budget keeps the rows beyond it on this
// server's disk (roles/server/table_rows.h), in one RowStore for all such tables,
// at ServerStoreDir(); a checkpoint holds the store's own checkpoint beside
// the shard file (roles/checkpoint/store.h).
//
// Threads: the tables belong to one WorkThread; Pull and Push may be called
// from any thread (the loop's) and post there. Replies are made there.
#pragma once

#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/transport/buffer.h"
#include "comm/transport/messages.h"
#include "embedding/id_map.h"
#include "embedding/row_store.h"
#include "roles/checkpoint/shard_file.h"
#include "roles/checkpoint/store.h"
#include "roles/placement/row_move_codec.h"
#include "roles/placement/server_tables.h"
#include "roles/server/replication.h"
#include "roles/server/table_replica_codec.h"
#include "roles/server/table_rows.h"
#include "roles/server/update_core.h"
#include "src/common/config/config.h"
#include "src/common/logging.h"
#include "src/common/mutex.h"
#include "src/common/tensor_memory.h"
#include "src/common/work_thread.h"

namespace pstrain {

class TableHost {
 public:
  using Reply = std::function<void(MessageBody body, Payload payload)>;

  // `rank`: this server's, naming its store directory; `servers`: the
  // placement its rows follow (ServerOfId over that many servers).
  // `store_dir`: where rows beyond a memory budget go, when not rank's
  // (a backup's copy of another server's tables).
  static StatusOr<std::unique_ptr<TableHost>> Create(const Config& config, int workers, int rank,
                                                     int servers, Logger log,
                                                     std::string store_dir = "");
  ~TableHost();

  void Pull(SparsePullRequest request, Buffer ids, Reply reply);
  void Push(SparsePushRequest request, Buffer payload, Reply reply);
  // A lost worker of a sync job, on every table: as PsShard::LoseWorker.
  void LoseWorker(int rank, int64_t last, const std::string& why,
                  std::function<void(StatusOr<int64_t>)> done);
  // A live change of workers, on every table: as PsShard::ChangeWorkers.
  void ChangeWorkers(int64_t step, std::vector<int> ranks, int workers,
                     std::function<void(const Status&)> done);

  // Checkpoints: every table's rows, optimizer state and clock, copied on
  // the table thread and handed to `done` there. In sync mode the copy waits
  // until every table has applied `step` steps (the chief asks once its own
  // push of the step is acknowledged, the others' may still be on the way).
  // With rows on disk, the store's checkpoint is made at the same moment in
  // <step dir>/server-<rank>-store, and its path handed over too.
  struct Snapshots {
    std::vector<TableSnapshot> tables;
    std::string store_checkpoint;  // empty: no rows on disk
  };
  using SnapshotDone = std::function<void(StatusOr<Snapshots>)>;
  void Snapshot(int64_t step, SnapshotDone done);
  // Before any worker sends: replaces each named table with its snapshot;
  // `store_checkpoint`, when not empty, is the store's checkpoint of the same
  // step, whose files are checked against `store_files` before it replaces
  // this server's store. A snapshot of a table this config does not have is
  // an error.
  Status Restore(std::vector<TableSnapshot> tables, const std::string& store_checkpoint = "",
                 const std::vector<StoreFile>& store_files = {});

  // Live moves of rows (roles/server/table_moves.h), on the table thread.
  // HandOffRows: takes out every row that a placement over `servers` puts
  // on another server than `rank` (this server's rank in it; -1: it
  // leaves, and gives every row up), and places rows over `servers` from
  // then on; `done` gets them (roles/placement/row_move_codec.h bytes),
  // their count and the steps the tables have applied. A failure puts back
  // what was taken. Phase kCopy copies the same rows of the tables all in
  // memory instead, and from then on notes each id pulled or pushed;
  // kDelta (after that copy, for the same placement) then takes them out
  // but sends only the rows not copied or touched since, with the ids of
  // rows copied that are gone (evicted).
  struct HandedRows {
    std::string bytes;
    int64_t rows = 0;
    int64_t step = 0;
  };
  void HandOffRows(int servers, int rank, RowsPhase phase,
                   std::function<void(StatusOr<HandedRows>)> done);
  // Installs rows handed off by another server (every one must be placed
  // on `rank`, this server's rank from now on, over `servers`), and places
  // rows over `servers` from then on.
  // Tables that have applied no step yet (a server that joined live) start
  // at `step`. Phase kCopy checks the rows and holds them aside, nothing
  // else; kDelta installs them, less the gone ids and those `rows` brings
  // again, with `rows`.
  void TakeOverRows(int servers, int rank, int64_t step, RowsPhase phase, Buffer rows,
                    std::function<void(Status)> done);
  // Every table's ServerRows::Digest, by name.
  void Digest(std::function<void(StatusOr<RowsDigestReply>)> done);
  using NamedDigests = std::vector<std::pair<std::string, RowsDigest>>;
  void Digests(std::function<void(StatusOr<NamedDigests>)> done);

  // Replication (roles/server/replication.h, roles/server/table_replication.cc).
  // As a primary of the rows placed on this host's rank: from now on each
  // change of a table (a pull's lookup, an update, an eviction) is sent
  // through `send` as it is made, and what tells a worker of it (a push's
  // Ack, a pull's rows) waits until the backups hold it; a push resent
  // after its update was applied is acknowledged, not applied again.
  // Then SendStates, before any change.
  void ReplicateTo(ReplicaSender send);
  // Every table's whole state to the backups; `done` once all hold them
  // (tables and bytes sent). At once when not replicating.
  void SendStates(std::function<void(const Status&, int64_t tables, int64_t bytes)> done);
  // As a backup of the server whose rank this host was made for: holds a
  // change of one of its tables (a Replicate of kind TableState or TableOps).
  void TakeReplica(Replicate change, Buffer payload, Reply reply);
  // A backup's copy of a lost server's tables becomes their primary: as
  // ReplicateTo, once every table's state has come and every change it
  // acknowledged was made; otherwise it answers every request with why
  // (its rows are lost), and logs it.
  void Promote(ReplicaSender send);
  // The server rank whose rows these are.
  int rank() const { return rank_; }

  // Table statistics, on the table thread (tests).
  StatusOr<EmbeddingTableCounters> Counters(const std::string& table);

 private:
  struct HostedTable {
    HostedTable(ServerRows t, int workers, UpdateMode mode)
        : table(std::move(t)),
          name(fmt::format("table '{}'", table.options().name)),
          core(workers, mode),
          pending_ids(workers),
          pending_grads(workers) {}
    ServerRows table;
    const std::string name;  // for errors
    UpdateCore core;
    // sync: the pushes of this step so far, by worker.
    std::vector<std::vector<int64_t>> pending_ids;
    std::vector<std::vector<float>> pending_grads;
    // sync: the step's rows as applied, each id once with the workers'
    // mean gradient (SumGathered). With train.clip_norm they wait here for
    // the factor (roles/server/update_core.h).
    std::vector<int64_t> step_ids;
    std::vector<float> step_grads;
    int64_t logged_step = 0;  // the last step counts were logged at
    // The ids of rows copied ahead of a move (HandOffRows kCopy), each
    // marked when pulled or changed by a push since; null when none were.
    std::unique_ptr<FlatIdMap<uint8_t>> copied_ahead;
    // A primary's changes on their way to the backups (ReplicateTo).
    ReplicationQueue queue;
    // A backup's: the last change of the primary's table it holds (0: its
    // state has not come yet).
    int64_t copy_seq = 0;
    Status copy_failed;  // a change held but not made: never promoted
    // A backup's copy of a tiered table: rows on the primary's disk still
    // to come after its state (kTableRows); whole at 0.
    int64_t rows_to_come = 0;
  };
  TableHost(const Config& config, int workers, int rank, int servers, Logger log)
      : config_(config),
        workers_(workers),
        rank_(rank),
        mode_(config.train.mode),
        servers_(servers),
        log_(log) {}

  std::unique_ptr<HostedTable> MakeHosted(ServerRows table) const;
  // Opens this server's store (a fresh one) when some table has a budget.
  Status OpenStore();
  // Closes the store, and every table over it first (each leaves a null).
  void CloseStore();
  // Replaces the store with `checkpoint`'s copy and every table with rows on
  // disk: those in `tables` from their snapshot, the others empty.
  Status RestoreStore(const std::string& checkpoint, const std::vector<StoreFile>& files);
  HostedTable* Find(const std::string& name);
  // Why a request placed over `servers` servers is refused (empty: it is not).
  std::string PlacementRefusal(const std::string& table, int servers) const;
  void DoPull(HostedTable& t, const Buffer& ids, const Reply& reply);
  // A push's size and ids, checked before anything is taken from it; its
  // ids.
  StatusOr<std::vector<int64_t>> CheckPush(HostedTable& t, const SparsePushRequest& request,
                                           const Buffer& payload);
  Status DoPush(HostedTable& t, const SparsePushRequest& request, const Buffer& payload);
  Status ApplyGathered(HostedTable& t, float scale);
  // ApplyGathered in two: every worker's rows of the step summed times
  // `scale` into step_ids/step_grads, then applied times `clip`.
  void SumGathered(HostedTable& t, float scale);
  Status ApplySummed(HostedTable& t, float clip);
  // train.clip_norm (roles/server/table_clip.cc): after a push, a step
  // just held gets its squared norm; a norm pull; a worker's factor.
  void NoteHeld(HostedTable& t);
  void PullNorm(HostedTable& t, const SparsePullRequest& request, const Reply& reply);
  void TakeClip(HostedTable& t, const SparsePushRequest& request, const Reply& reply);
  void AfterPush(HostedTable& t);

  // Rows moving live (roles/server/table_moves.cc).
  HandedRows CopyRowsAhead(int servers, int rank);
  StatusOr<HandedRows> HandOffDelta(int servers, int rank, RowsPhase phase);
  // Notes the ids of a pull or push as touched since a copy ahead.
  void Touched(HostedTable& t, const int64_t* ids, size_t n);
  // Checks rows that move here: known tables of their dim, each row placed
  // on `rank` over `servers`.
  Status CheckRowsFit(int servers, int rank, const std::vector<MovedRows>& moved);
  // Installs rows that move here, CheckRowsFit already (TakeOverRows).
  Status InstallRows(int servers, int rank, int64_t step, std::vector<MovedRows> moved);
  // A copy ahead held aside, the delta at the change: what to install.
  // A copy installed early loses the rows that came again or are gone.
  StatusOr<std::vector<MovedRows>> WithRowsAside(int servers, int rank,
                                                 std::vector<MovedRows> delta);
  void DropCopies();
  // Holds a copy ahead aside, or installs it (CopiedAhead::installed);
  // CheckRowsFit already.
  Status KeepCopyAhead(int servers, int rank, std::vector<MovedRows> moved);
  // Removes a copy ahead installed early (the change moves rows whole).
  Status RemoveInstalledCopy();

  // Replication (roles/server/table_replication.cc).
  // Sends a change just made to the backups (when replicating).
  void SendChange(HostedTable& t, TableOp op, int worker, const int64_t* ids, size_t n,
                  const float* grads);
  void OnReplicated(const std::string& table, int64_t seq, const Status& status);
  // What a change's answer from the backups runs: OnReplicated, here.
  std::function<void(const Status&)> WhenHeld(const std::string& table, int64_t seq);
  // A push whose update this table applied already (sent again after its
  // server was lost).
  bool IsResentPush(const HostedTable& t, const SparsePushRequest& request) const;
  // Answers `ack` once it holds the change (a state, or a change checked
  // whole and in order, before it is made); an error is returned instead.
  Status HoldReplica(const Replicate& change, const Buffer& payload, const Reply& ack);
  // Makes a primary's change on a backup's copy of table `t`.
  Status Replay(HostedTable& t, int worker, const TableChange& change);
  // A backup's copy from its primary's state (change `seq`), with the
  // rows on disk still to come; and those rows.
  Status TakeState(const ServerTable& spec, int64_t seq, const TableState& state);
  Status HoldDiskRows(HostedTable& t, int64_t seq, const Buffer& payload, const Reply& ack);
  // `rows` of `table` (named `name`), as they travel to another server
  // (a live move, a backup's copy).
  static MovedRows Moving(const std::string& name, const ServerRows& table, RowBatch rows);
  // A primary's tiered table: its rows on disk alone, after its state; adds
  // the bytes sent to *bytes.
  Status SendDiskRows(HostedTable& t, int64_t* bytes);
  static ReplicationQueue::Then AckOnceHeld(Reply reply);

  bool ReadyFor(int64_t step) const;
  void TakeSnapshot(int64_t step, const SnapshotDone& done);

  // Pull replies' row buffers, reused: a fresh multi-MiB allocation per
  // pull costs a page fault every 4 KiB, which halved pull throughput.
  // Returned by the payload's keepalive, on the loop thread.
  struct RowBuffers {
    Mutex mutex;
    std::vector<std::unique_ptr<FloatBuffer>> free GUARDED_BY(mutex);
  };
  static std::shared_ptr<FloatBuffer> GetRows(const std::shared_ptr<RowBuffers>& pool,
                                              size_t floats);

  const Config config_;
  std::vector<ServerTable> specs_;  // by the config, set in Create
  int workers_;                     // the table thread
  int rank_;                        // changes in a live change of the servers (TakeOverRows)
  const UpdateMode mode_;
  int servers_;  // rows placed over this many servers; table thread
  std::shared_ptr<RowBuffers> row_buffers_ = std::make_shared<RowBuffers>();
  std::vector<std::pair<int64_t, SnapshotDone>> waiting_snapshots_;  // table thread
  ReplicaSender send_;           // null: not replicating; table thread
  Status not_whole_;             // a copy promoted without all of it; table thread
  std::vector<float> replayed_;  // a backup's lookups write here
  // A move copied ahead, for the placement over `servers` where this server
  // holds `rank`: as the server rows leave (the tables' copied_ahead), or
  // as the one they go to (the rows held aside). Table thread.
  struct CopiedAhead {
    int servers = 0;
    int rank = 0;
    std::vector<MovedRows> aside;
    // A server that joined, placing rows over `servers` already (no
    // request reaches its tables before the change), installs the copy at
    // once: the ids of each table's rows installed so, and `aside` holds
    // no rows.
    std::map<std::string, std::vector<int64_t>> installed;
  };
  std::optional<CopiedAhead> rows_given_ahead_, rows_taken_ahead_;
  Logger log_;
  std::string store_dir_;  // empty: ServerStoreDir of rank_
  // A copy's store (store_dir_ set) holds nothing once the copy is gone:
  // its directory goes after the store closes.
  struct RemovedAtEnd {
    ~RemovedAtEnd();
    std::string dir;
  } removed_at_end_;
  std::unique_ptr<RowStore> store_;  // before the tables, which use it
  std::map<std::string, std::unique_ptr<HostedTable>, std::less<>> tables_;
  WorkThread thread_;  // last: joins before the tables go
};

}  // namespace pstrain
