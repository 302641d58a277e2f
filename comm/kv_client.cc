#include "comm/kv_client.h"

#include <fmt/format.h>

#include <atomic>

namespace pstrain {

KvClient::KvClient(EventLoop* loop, std::vector<Connection::Ptr> servers, int worker_rank,
                   PartitionMap map)
    : loop_(loop), servers_(std::move(servers)), worker_rank_(worker_rank), map_(std::move(map)) {}

KvHandle KvClient::Failed(Status status) {
  KvHandle handle;
  handle.done_.Set(std::move(status));
  return handle;
}

KvHandle KvClient::Send(int tensor, const char* verb, RequestMaker make, const float* out_data,
                        float* in_data) {
  if (tensor < 0 || tensor >= static_cast<int>(map_.tensors().size()))
    return Failed(NotFound(fmt::format("{} of tensor #{}: no such tensor", verb, tensor)));
  KvHandle handle;
  Completion<Status> done = handle.done_;
  const std::string& name = map_.tensors()[tensor].name;
  bool posted = loop_->Post([this, tensor, verb, make = std::move(make), out_data, in_data, done,
                             name] {
    const std::vector<Partition>& parts = map_.partitions(tensor);
    auto remaining = std::make_shared<std::atomic<size_t>>(parts.size());
    for (const Partition& p : parts) {
      const Connection::Ptr& server = servers_[p.server];
      const size_t bytes = static_cast<size_t>(p.elements) * sizeof(float);
      Payload payload;
      if (out_data != nullptr)
        payload = Payload{reinterpret_cast<const uint8_t*>(out_data + p.offset), bytes, nullptr};
      Buffer reply_into;
      if (in_data != nullptr)
        reply_into = Buffer{reinterpret_cast<uint8_t*>(in_data + p.offset), bytes, nullptr};
      std::string where =
          fmt::format("{} '{}' partition {} on server {}", verb, name, p.part, p.server);
      server->Call(
          make(p),
          [done, remaining, where](StatusOr<Incoming> reply) {
            if (!reply.ok()) return done.Set(reply.status().WithContext(where));
            if (--*remaining == 0) done.Set(Status::OK());
          },
          std::move(payload), std::move(reply_into));
    }
  });
  if (!posted) return Failed(Aborted(fmt::format("{} '{}': the worker is stopping", verb, name)));
  return handle;
}

KvHandle KvClient::Init(int tensor, const float* values) {
  const int worker = worker_rank_;
  return Send(
      tensor, "init",
      [this, worker](const Partition& p) -> MessageBody {
        return PushRequest{map_.tensors()[p.tensor].name, p.part, worker, 0, PushKind::kInit};
      },
      values, nullptr);
}

KvHandle KvClient::Push(int tensor, const float* gradient, int64_t clock) {
  const int worker = worker_rank_;
  return Send(
      tensor, "push",
      [this, worker, clock](const Partition& p) -> MessageBody {
        return PushRequest{map_.tensors()[p.tensor].name, p.part, worker, clock,
                           PushKind::kGradient};
      },
      gradient, nullptr);
}

KvHandle KvClient::Pull(int tensor, float* values, int64_t min_clock) {
  const int worker = worker_rank_;
  return Send(
      tensor, "pull",
      [this, worker, min_clock](const Partition& p) -> MessageBody {
        return PullRequest{map_.tensors()[p.tensor].name, p.part, worker, min_clock};
      },
      nullptr, values);
}

KvHandle KvClient::Push(const std::string& name, const float* gradient, int64_t clock) {
  int t = map_.Find(name);
  if (t < 0) return Failed(NotFound(fmt::format("push of unknown tensor '{}'", name)));
  return Push(t, gradient, clock);
}

KvHandle KvClient::Pull(const std::string& name, float* values, int64_t min_clock) {
  int t = map_.Find(name);
  if (t < 0) return Failed(NotFound(fmt::format("pull of unknown tensor '{}'", name)));
  return Pull(t, values, min_clock);
}

}  // namespace pstrain
