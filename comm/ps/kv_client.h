// KvClient: a worker's push and pull of PS-managed tensors.
//
// A tensor is cut into partitions by the PartitionMap; each call sends one
// request per partition to the server that holds it, all in flight at once,
// and returns a KvHandle that completes when every partition has answered.
// Bytes go on the wire straight from the caller's memory and land straight
// in it (no per-element copy): the memory must stay valid, and a pushed
// tensor unchanged, until the handle completes.
//
// Thread-safety: any thread may call; the requests are issued on the loop
// (Issue, checked there where asserts are on: PSTRAIN_DCHECK_ON_LOOP).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "comm/ps/partition_map.h"
#include "comm/transport/completion.h"

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
  // averaging round).
  enum class Kind { kInit, kPush, kPull, kDelta };
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
};

class KvClient {
 public:
  // `servers[r]` is the connection to server rank r, on `loop`.
  KvClient(EventLoop* loop, std::vector<std::shared_ptr<Connection>> servers, int worker_rank,
           PartitionMap map);

  const PartitionMap& map() const { return map_; }

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

 private:
  // The requests of one Run() or Save() count down together.
  void Issue(const KvOp& op, const std::shared_ptr<CountDown>& batch);
  KvHandle Failed(Status status);

  EventLoop* loop_;
  std::vector<std::shared_ptr<Connection>> servers_;
  const int worker_rank_;
  PartitionMap map_;
  // Per tensor and partition: the server's name of the delta pull reply the
  // memory holds (0: none). Loop thread only.
  std::vector<std::vector<uint64_t>> held_;
  PullCounts compressed_pulls_;
};

}  // namespace pstrain
