// KvClient: a worker's push and pull of PS-managed tensors.
//
// A tensor is cut into partitions by the PartitionMap; each call sends one
// request per partition to the server that holds it, all in flight at once,
// and returns a KvHandle that completes when every partition has answered.
// Bytes go on the wire straight from the caller's memory and land straight
// in it (no per-element copy): the memory must stay valid, and a pushed
// tensor unchanged, until the handle completes.
//
// Thread-safety: any thread may call; the requests are issued on the loop.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/completion.h"
#include "comm/connection.h"
#include "comm/event_loop.h"
#include "comm/partition_map.h"

namespace pstrain {

// Completion of one push or pull. Copyable; Wait() may be called any number
// of times.
class KvHandle {
 public:
  Status Wait() const { return done_.Wait(); }
  bool IsDone() const { return done_.IsSet(); }

 private:
  friend class KvClient;
  Completion<Status> done_;
};

class KvClient {
 public:
  // `servers[r]` is the connection to server rank r, on `loop`.
  KvClient(EventLoop* loop, std::vector<Connection::Ptr> servers, int worker_rank,
           PartitionMap map);

  const PartitionMap& map() const { return map_; }

  // The chief's initial values of tensor `tensor` (index in map().tensors()).
  KvHandle Init(int tensor, const float* values);
  // A gradient for step `clock`.
  KvHandle Push(int tensor, const float* gradient, int64_t clock);
  // The values, once every partition's clock has reached `min_clock`.
  KvHandle Pull(int tensor, float* values, int64_t min_clock);

  // The same by name; an unknown name completes at once with an error.
  KvHandle Push(const std::string& name, const float* gradient, int64_t clock);
  KvHandle Pull(const std::string& name, float* values, int64_t min_clock);

 private:
  // Issues one request per partition of `tensor`; `make` builds each.
  using RequestMaker = std::function<MessageBody(const Partition&)>;
  KvHandle Send(int tensor, const char* verb, RequestMaker make, const float* out_data,
                float* in_data);
  KvHandle Failed(Status status);

  EventLoop* loop_;
  std::vector<Connection::Ptr> servers_;
  const int worker_rank_;
  PartitionMap map_;
};

}  // namespace pstrain
