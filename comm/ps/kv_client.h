// KvClient: a worker's push and pull of PS-managed tensors.
//
// A tensor is cut into partitions by the PartitionMap; each call sends one
// request per partition to the server that holds it, all in flight at once,
// and returns a KvHandle that completes when every partition has answered.
// Bytes go on the wire straight from the caller's memory and land straight
// in it (no per-element copy): the memory must stay valid, and a pushed
// tensor unchanged, until the handle completes.
//
// A partition may move to another server while the job runs
// (roles/server/handoff.h): a request its old server answers Moved is sent
// again to the server named, and the partition is routed there from then on.
//
// With replicated servers (roles/server/replication.h, EnableFailover), a
// request whose server's connection closes is not failed: it waits for the
// scheduler's next ServerView, which names the server now holding the
// partition, and is sent again there (UseServerView). A push its old server
// applied before it died is answered by the new one without applying it
// twice.
//
// Thread-safety: any thread may call; the requests are issued on the loop
// (Issue, checked there where asserts are on: PSTRAIN_DCHECK_ON_LOOP).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/ps/partition_map.h"
#include "comm/transport/completion.h"
#include "comm/transport/messages.h"

namespace pstrain {

class Connection;  // comm/transport/connection.h
class EventLoop;   // comm/transport/event_loop.h

// Completion of one push or pull. Copyable; Wait() may be called any number
// of times.
class KvHandle {
 public:
  // Small requests spin briefly before sleeping (see Completion).
  Status Wait() const { return done_.SpinThenWait(spin_); }
  bool IsDone() const { return done_.IsSet(); }

 private:
  friend class KvClient;
  Completion<Status> done_;
  std::chrono::microseconds spin_{0};
};

// One request of a batch: a tensor's init, push or pull.
struct KvOp {
  // kDelta: mode average, the weight change since the last pull (clock: the
  // averaging round). train.clip_norm (roles/server/update_core.h):
  // kNorm, the squared norm of step `clock`'s mean gradient over each
  // partition, into `norms`; kClipScale, step `clock`'s clip factor,
  // `data` pointing at the one float sent to every partition.
  enum class Kind { kInit, kPush, kPull, kDelta, kNorm, kClipScale };
  Kind kind;
  int tensor;     // index in map().tensors()
  float* data;    // values or gradient (read for init/push, written for pull)
  int64_t clock;  // push: the worker's step; pull: min_clock; init: unused
  // kPush only: when set, the gradient goes as these threshold messages
  // (optim/threshold_codec.h), (*encoded)[i] for the tensor's partition i,
  // instead of `data`. Must stay valid, unchanged, until the handle completes.
  const std::vector<std::vector<uint8_t>>* encoded = nullptr;
  // kPull only: a compressed pull: the server may answer with the largest
  // changes since this client's previous delta pull of the same partition
  // (roles/server/pull_deltas.h), which are added to `data`: `data` must
  // hold exactly what that pull left there (the same memory, untouched
  // since; see ForgetDeltaPulls).
  bool delta = false;
  // kNorm only: norms[i] gets partition i's share; as many as partitions.
  double* norms = nullptr;
};

class KvClient {
 public:
  // `servers[r]` is the connection to server rank r, on `loop`.
  KvClient(EventLoop* loop, std::vector<std::shared_ptr<Connection>> servers, int worker_rank,
           PartitionMap map);

  const PartitionMap& map() const { return map_; }
  // The servers this client sends to (any thread; changes only through
  // UseServers, which the caller of both orders).
  int servers() const { return server_count_.load(); }

  // Sends every op (one request per partition, all in flight at once); the
  // handle completes when all have answered, with the first error if any.
  KvHandle Run(std::vector<KvOp> ops);

  // The chief's initial values of tensor `tensor` (index in map().tensors()).
  KvHandle Init(int tensor, const float* values);
  // A gradient for step `clock`.
  KvHandle Push(int tensor, const float* gradient, int64_t clock);
  // The values, once every partition's clock has reached `min_clock`.
  KvHandle Pull(int tensor, float* values, int64_t min_clock);
  // Push and pull together: the pull waits on the server for the push's
  // update (sync: min_clock = clock + 1) instead of costing a second trip.
  KvHandle PushPull(int tensor, const float* gradient, int64_t clock, float* values,
                    int64_t min_clock);

  // Asks every server to write its shard of checkpoint `step`; files[r] gets
  // server r's file name. `files` must stay valid until the handle completes.
  KvHandle Save(int64_t step, std::vector<std::string>* files);

  // The next delta pull of every partition is answered dense (the copy
  // holds something else now, or a dense copy is wanted: before a test or
  // at the end). Ordered with the requests of later Run() calls.
  void ForgetDeltaPulls();

  // Totals over the compressed pulls answered (KvOp::delta), dense answers
  // included: the bytes received and what dense ones would have been.
  struct PullCounts {
    std::atomic<int64_t> bytes{0};
    std::atomic<int64_t> dense_bytes{0};
    void Add(size_t received, int64_t elements) {
      bytes += static_cast<int64_t>(received);
      dense_bytes += elements * static_cast<int64_t>(sizeof(float));
    }
  };
  const PullCounts& compressed_pulls() const { return compressed_pulls_; }

  // The same by name; an unknown name completes at once with an error.
  KvHandle Push(const std::string& name, const float* gradient, int64_t clock);
  KvHandle Pull(const std::string& name, float* values, int64_t min_clock);

  // Moves partition `part` of tensor `tensor` to server `to_rank` while the
  // job runs (the chief only; roles/server/handoff.h): its state, optimizer
  // and clocks included. `version` orders moves: larger than any before.
  // Call it at a step boundary, when no pull of the partition waits.
  KvHandle MovePartition(int tensor, uint32_t part, int to_rank, int64_t version);
  // The job gained or lost servers (roles/worker/grow.h): `servers[r]` is
  // the connection to server rank r; no partition may be routed past them.
  // Blocks until the loop took them.
  Status UseServers(std::vector<std::shared_ptr<Connection>> servers);
  // A live change of workers gave this worker another rank: requests name
  // it from the next Run on. Not while one is in flight.
  void UseWorkerRank(int rank) { worker_rank_ = rank; }
  // Routes every partition as `placement` (of the same tensors and cut)
  // places it, as of placement version `version`.
  Status UsePlacement(const PartitionMap& placement, int64_t version);
  // Requests answered Moved and sent again to the server named.
  int64_t moved_retries() const { return moved_retries_.load(); }

  // A request whose server is lost waits up to `patience` for a ServerView
  // that names where its partition went, instead of failing at once.
  void EnableFailover(std::chrono::milliseconds patience);
  // The job is over or paused: no view will come, and every request that
  // waits for one fails now with `why`. Loop thread.
  void FailParked(const Status& why);
  // The servers holding each partition from now on (comm/transport/
  // messages.h, ServerView); the lost server's connection is closed and
  // what waited on it is sent again where it went. Loop thread.
  void UseServerView(const ServerView& view);
  // A new connection to server `rank` (a server that joined the running
  // job again); what waits for it is sent. Loop thread.
  void UseServerConnection(int rank, std::shared_ptr<Connection> conn);
  // Requests sent again after their server was lost.
  int64_t failover_retries() const { return failover_retries_.load(); }
  // Partitions this client moved (a move to where one is already is none),
  // and the bytes of their values.
  struct MovedCounts {
    std::atomic<int64_t> partitions{0};
    std::atomic<int64_t> bytes{0};
  };
  const MovedCounts& moved() const { return moved_; }

 private:
  // The requests of one Run() or Save() count down together.
  void Issue(const KvOp& op, const std::shared_ptr<CountDown>& batch);
  // Partition `p` of `op`, to the server it is routed to; `hops`: the times
  // it was answered Moved before.
  void IssuePart(const KvOp& op, const Partition& p, const std::shared_ptr<CountDown>& batch,
                 int hops);
  // A Moved answer: route the partition as it says and send the request
  // there, or report why not.
  void Reroute(const KvOp& op, const Partition& p, const Moved& moved,
               const std::shared_ptr<CountDown>& batch, int hops);
  KvHandle Failed(Status status);
  // A request to `server` failed with `status`: with failover on and the
  // link gone, it is sent again where its partition went, or waits for the
  // view that says where (true); otherwise the caller reports it (false).
  bool FailOver(const KvOp& op, const Partition& p, const std::shared_ptr<CountDown>& batch,
                int hops, int server, const Status& status);
  // Fails the requests that waited past their deadline.
  void ExpireParked();
  struct Parked {
    KvOp op;
    Partition p;
    std::shared_ptr<CountDown> batch;
    int hops;
    int server;  // the lost server it was sent to
    uint64_t deadline_ms;
    Status why;
  };
  // Sends again the waiting requests `routed` says have a server now.
  void ResendParked(const std::function<bool(const Parked&)>& routed);

  EventLoop* loop_;
  std::vector<std::shared_ptr<Connection>> servers_;
  std::atomic<int> worker_rank_;
  PartitionMap map_;
  // Per tensor and partition: the server's name of the delta pull reply the
  // memory holds (0: none). Loop thread only.
  std::vector<std::vector<uint64_t>> held_;
  PullCounts compressed_pulls_;
  // Per tensor and partition: the server rank it is sent to, and the
  // placement version that rank is from (0: the map's). Loop thread only.
  std::vector<std::vector<int>> route_;
  std::vector<std::vector<int64_t>> route_version_;
  std::atomic<int64_t> moved_retries_{0};
  std::atomic<int64_t> failover_retries_{0};
  // Failover: off until EnableFailover; loop thread after.
  std::chrono::milliseconds failover_patience_{0};
  bool failover_stopped_ = false;  // FailParked: nothing waits for a view any more
  std::vector<Parked> parked_;
  int64_t view_ = 0;         // the newest ServerView taken
  std::vector<int> owners_;  // its owners (empty: every server holds its own)
  // A checkpoint's shard of server `rank`, asked of whoever holds its
  // partitions; a lost one is asked again every kSaveRetryMs, `retries`
  // times at most, until a view names its heir.
  void SaveShard(int64_t step, int rank, std::vector<std::string>* files,
                 const std::shared_ptr<CountDown>& batch, int retries);
  static constexpr int64_t kSaveRetryMs = 100;
  std::atomic<int> server_count_{0};
  MovedCounts moved_;
};

}  // namespace pstrain
