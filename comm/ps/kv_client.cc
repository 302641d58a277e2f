#include "comm/ps/kv_client.h"

#include <fmt/format.h>

#include <atomic>

#include "comm/ps/pull_reply.h"
#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"

namespace pstrain {

KvClient::KvClient(EventLoop* loop, std::vector<Connection::Ptr> servers, int worker_rank,
                   PartitionMap map)
    : loop_(loop), servers_(std::move(servers)), worker_rank_(worker_rank), map_(std::move(map)) {
  held_.resize(map_.tensors().size());
  for (size_t t = 0; t < held_.size(); ++t)
    held_[t].assign(map_.partitions(static_cast<int>(t)).size(), 0);
}

KvHandle KvClient::Failed(Status status) {
  KvHandle handle;
  handle.done_.Set(std::move(status));
  return handle;
}

namespace {

// Batches of up to kSpinBytes spin up to kSpinFor before their waiter sleeps.
constexpr int64_t kSpinBytes = 64 * 1024;
constexpr std::chrono::microseconds kSpinFor{100};

const char* Verb(KvOp::Kind kind) {
  switch (kind) {
    case KvOp::Kind::kInit:
      return "init";
    case KvOp::Kind::kPush:
      return "push";
    case KvOp::Kind::kPull:
      return "pull";
    case KvOp::Kind::kDelta:
      return "weight delta push";
  }
  return "?";
}

}  // namespace

KvHandle KvClient::Run(std::vector<KvOp> ops) {
  size_t requests = 0;
  int64_t bytes = 0;
  for (const KvOp& op : ops) {
    if (op.tensor < 0 || op.tensor >= static_cast<int>(map_.tensors().size()))
      return Failed(
          NotFound(fmt::format("{} of tensor #{}: no such tensor", Verb(op.kind), op.tensor)));
    if (op.encoded != nullptr &&
        (op.kind != KvOp::Kind::kPush || op.encoded->size() != map_.partitions(op.tensor).size()))
      return Failed(InvalidArgument(fmt::format(
          "{} of tensor '{}': {} encoded messages for {} partitions", Verb(op.kind),
          map_.tensors()[op.tensor].name, op.encoded->size(), map_.partitions(op.tensor).size())));
    requests += map_.partitions(op.tensor).size();
    bytes += map_.tensors()[op.tensor].elements * static_cast<int64_t>(sizeof(float));
  }
  KvHandle handle;
  // Waiting on a small batch is about one round trip: worth spinning for.
  if (bytes <= kSpinBytes) handle.spin_ = kSpinFor;
  if (requests == 0) {
    handle.done_.Set(Status::OK());
    return handle;
  }
  auto batch = CountDown::Into(handle.done_, requests);
  bool posted = loop_->Post([this, ops = std::move(ops), batch] {
    for (const KvOp& op : ops) Issue(op, batch);
  });
  if (!posted) return Failed(Aborted("the worker is stopping"));
  return handle;
}

// Loop thread: one request per partition of `op`.
void KvClient::Issue(const KvOp& op, const std::shared_ptr<CountDown>& batch) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  const std::string& name = map_.tensors()[op.tensor].name;
  for (const Partition& p : map_.partitions(op.tensor)) {
    const size_t bytes = static_cast<size_t>(p.elements) * sizeof(float);
    uint8_t* data = reinterpret_cast<uint8_t*>(op.data + p.offset);
    MessageBody body;
    Payload payload;
    Buffer reply_into;
    if (op.kind == KvOp::Kind::kPull && op.delta) {
      uint64_t* held = &held_[op.tensor][p.part];
      PullRequest pull{name, p.part, worker_rank_, op.clock, p.elements};
      pull.accept_delta = true;
      pull.have_seq = *held;
      // The reply may be a message of any size: it lands in a buffer of
      // its own and is added (or copied) into `data` here.
      *held = 0;  // until a reply has been taken whole
      float* values = op.data + p.offset;
      servers_[p.server]->Call(
          std::move(pull), [batch, &name, p, values, held, counts = &compressed_pulls_,
                            had_view = pull.have_seq != 0](StatusOr<Incoming> reply) {
            Status st = reply.status();
            if (st.ok()) {
              const auto* answer = std::get_if<PullReply>(&reply->message.body);
              st = answer == nullptr
                       ? InvalidArgument("a pull answered without a PullReply")
                       : TakePullReply(*answer, reply->payload.data, reply->payload.size,
                                       p.elements, had_view, values);
              if (st.ok()) *held = answer->seq;
              if (st.ok()) counts->Add(reply->payload.size, p.elements);
            }
            batch->Report(st.ok()
                              ? st
                              : st.WithContext(fmt::format("pull '{}' partition {} on server {}",
                                                           name, p.part, p.server)));
          });
      continue;
    }
    if (op.kind == KvOp::Kind::kPull) {
      // A dense pull overwrites the copy: no view of it is held any more.
      held_[op.tensor][p.part] = 0;
      body = PullRequest{name, p.part, worker_rank_, op.clock, p.elements};
      reply_into = Buffer{data, bytes, nullptr};
    } else {
      const bool init = op.kind == KvOp::Kind::kInit;
      const PushKind kind = init                            ? PushKind::kInit
                            : op.kind == KvOp::Kind::kDelta ? PushKind::kDelta
                                                            : PushKind::kGradient;
      PushRequest push{name, p.part, worker_rank_, init ? 0 : op.clock, kind};
      if (op.encoded != nullptr) {
        const std::vector<uint8_t>& message = (*op.encoded)[p.part];
        push.encoding = PushEncoding::kThreshold;
        payload = Payload{message.data(), message.size(), nullptr};
      } else {
        payload = Payload{data, bytes, nullptr};
      }
      body = std::move(push);
    }
    const char* verb = Verb(op.kind);
    servers_[p.server]->Call(
        std::move(body),
        [batch, verb, &name, p](StatusOr<Incoming> reply) {
          if (reply.ok()) return batch->Report(Status::OK());
          batch->Report(reply.status().WithContext(
              fmt::format("{} '{}' partition {} on server {}", verb, name, p.part, p.server)));
        },
        std::move(payload), std::move(reply_into));
  }
}

void KvClient::ForgetDeltaPulls() {
  loop_->Post([this] {
    for (auto& tensor : held_)
      for (uint64_t& held : tensor) held = 0;
  });
}

KvHandle KvClient::Init(int tensor, const float* values) {
  return Run({{KvOp::Kind::kInit, tensor, const_cast<float*>(values), 0}});
}

KvHandle KvClient::Push(int tensor, const float* gradient, int64_t clock) {
  return Run({{KvOp::Kind::kPush, tensor, const_cast<float*>(gradient), clock}});
}

KvHandle KvClient::Pull(int tensor, float* values, int64_t min_clock) {
  return Run({{KvOp::Kind::kPull, tensor, values, min_clock}});
}

KvHandle KvClient::PushPull(int tensor, const float* gradient, int64_t clock, float* values,
                            int64_t min_clock) {
  return Run({{KvOp::Kind::kPush, tensor, const_cast<float*>(gradient), clock},
              {KvOp::Kind::kPull, tensor, values, min_clock}});
}

KvHandle KvClient::Save(int64_t step, std::vector<std::string>* files) {
  KvHandle handle;
  files->assign(servers_.size(), "");
  if (servers_.empty()) {
    handle.done_.Set(Status::OK());
    return handle;
  }
  auto batch = CountDown::Into(handle.done_, servers_.size());
  bool posted = loop_->Post([this, step, files, batch] {
    PSTRAIN_DCHECK_ON_LOOP(loop_);
    for (size_t r = 0; r < servers_.size(); ++r) {
      // `files` stays valid: the handle completes only after the last reply.
      servers_[r]->Call(SaveRequest{step}, [files, r, batch](StatusOr<Incoming> reply) {
        if (!reply.ok())
          return batch->Report(
              reply.status().WithContext(fmt::format("checkpoint on server {}", r)));
        if (auto* saved = std::get_if<SaveReply>(&reply->message.body)) (*files)[r] = saved->file;
        batch->Report(Status::OK());
      });
    }
  });
  if (!posted) return Failed(Aborted("the worker is stopping"));
  return handle;
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
