#include "comm/ps/kv_client.h"

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "comm/ps/pull_reply.h"
#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/timer.h"

namespace pstrain {

KvClient::KvClient(EventLoop* loop, std::vector<Connection::Ptr> servers, int worker_rank,
                   PartitionMap map)
    : loop_(loop), servers_(std::move(servers)), worker_rank_(worker_rank), map_(std::move(map)) {
  server_count_ = static_cast<int>(servers_.size());
  held_.resize(map_.tensors().size());
  route_.resize(held_.size());
  route_version_.resize(held_.size());
  for (size_t t = 0; t < held_.size(); ++t) {
    const std::vector<Partition>& parts = map_.partitions(static_cast<int>(t));
    held_[t].assign(parts.size(), 0);
    route_version_[t].assign(parts.size(), 0);
    for (const Partition& p : parts) route_[t].push_back(p.server);
  }
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
    case KvOp::Kind::kNorm:
      return "norm pull";
    case KvOp::Kind::kClipScale:
      return "clip factor push";
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
    if ((op.kind == KvOp::Kind::kNorm) != (op.norms != nullptr) ||
        (op.kind != KvOp::Kind::kNorm && op.data == nullptr))
      return Failed(InvalidArgument(fmt::format("{} of tensor '{}' without its {}", Verb(op.kind),
                                                map_.tensors()[op.tensor].name,
                                                op.kind == KvOp::Kind::kNorm ? "shares" : "data")));
    requests += map_.partitions(op.tensor).size();
    const bool values = op.kind != KvOp::Kind::kNorm && op.kind != KvOp::Kind::kClipScale;
    if (values) bytes += map_.tensors()[op.tensor].elements * static_cast<int64_t>(sizeof(float));
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
  for (const Partition& p : map_.partitions(op.tensor)) IssuePart(op, p, batch, 0);
}

namespace {

// A partition moved at most this many times while one request chased it.
constexpr int kMaxMovedHops = 4;

const Moved* MovedIn(const StatusOr<Incoming>& reply) {
  return reply.ok() ? std::get_if<Moved>(&reply->message.body) : nullptr;
}

}  // namespace

void KvClient::IssuePart(const KvOp& op, const Partition& p,
                         const std::shared_ptr<CountDown>& batch, int hops) {
  const std::string& name = map_.tensors()[op.tensor].name;
  const int server = route_[op.tensor][p.part];
  const size_t bytes = static_cast<size_t>(p.elements) * sizeof(float);
  // A partition's values or gradient; a norm or a clip factor has none.
  const bool values = op.kind != KvOp::Kind::kNorm && op.kind != KvOp::Kind::kClipScale;
  uint8_t* data = values ? reinterpret_cast<uint8_t*>(op.data + p.offset) : nullptr;
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
    servers_[server]->Call(std::move(pull), [this, op, batch, hops, &name, p, server, values, held,
                                             had_view =
                                                 pull.have_seq != 0](StatusOr<Incoming> reply) {
      if (const Moved* moved = MovedIn(reply)) return Reroute(op, p, *moved, batch, hops);
      if (FailOver(op, p, batch, hops, server, reply.status())) return;
      Status st = reply.status();
      if (st.ok()) {
        const auto* answer = std::get_if<PullReply>(&reply->message.body);
        st = answer == nullptr ? InvalidArgument("a pull answered without a PullReply")
                               : TakePullReply(*answer, reply->payload.data, reply->payload.size,
                                               p.elements, had_view, values);
        if (st.ok()) *held = answer->seq;
        if (st.ok()) compressed_pulls_.Add(reply->payload.size, p.elements);
      }
      batch->Report(st.ok() ? st
                            : st.WithContext(fmt::format("pull '{}' partition {} on server {}",
                                                         name, p.part, server)));
    });
    return;
  }
  if (op.kind == KvOp::Kind::kNorm) {
    PullRequest pull{name, p.part, worker_rank_, op.clock, p.elements};
    pull.norm = true;
    double* share = op.norms + p.part;
    servers_[server]->Call(std::move(pull), [this, op, batch, hops, &name, p, server,
                                             share](StatusOr<Incoming> reply) {
      if (const Moved* moved = MovedIn(reply)) return Reroute(op, p, *moved, batch, hops);
      if (FailOver(op, p, batch, hops, server, reply.status())) return;
      StatusOr<double> squares = SquaredNormIn<PullReply>(reply);
      if (squares.ok()) *share = *squares;
      const Status st = squares.status();
      batch->Report(st.ok() ? st
                            : st.WithContext(fmt::format("norm pull '{}' partition {} on server {}",
                                                         name, p.part, server)));
    });
    return;
  }
  if (op.kind == KvOp::Kind::kClipScale) {
    body = PushRequest{name, p.part, worker_rank_, op.clock, PushKind::kClipScale};
    payload = Payload{reinterpret_cast<const uint8_t*>(op.data), sizeof(float), nullptr};
  } else if (op.kind == KvOp::Kind::kPull) {
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
  servers_[server]->Call(
      std::move(body),
      [this, op, batch, hops, &name, p, server](StatusOr<Incoming> reply) {
        if (const Moved* moved = MovedIn(reply)) return Reroute(op, p, *moved, batch, hops);
        if (reply.ok()) return batch->Report(Status::OK());
        if (FailOver(op, p, batch, hops, server, reply.status())) return;
        batch->Report(reply.status().WithContext(
            fmt::format("{} '{}' partition {} on server {}", Verb(op.kind), name, p.part, server)));
      },
      std::move(payload), std::move(reply_into));
}

void KvClient::EnableFailover(std::chrono::milliseconds patience) {
  loop_->Post([this, patience] { failover_patience_ = patience; });
}

bool KvClient::FailOver(const KvOp& op, const Partition& p, const std::shared_ptr<CountDown>& batch,
                        int hops, int server, const Status& status) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  // Only a link that is gone: a server's refusal stands.
  if (failover_patience_.count() <= 0 || failover_stopped_ ||
      status.code() != StatusCode::kUnavailable)
    return false;
  if (hops + 1 >= kMaxMovedHops) return false;
  const int now_at = route_[op.tensor][p.part];
  if (now_at != server && servers_[now_at] && !servers_[now_at]->closed()) {
    ++failover_retries_;
    IssuePart(op, p, batch, hops + 1);
    return true;
  }
  const uint64_t patience = static_cast<uint64_t>(failover_patience_.count());
  parked_.push_back({op, p, batch, hops, server, loop_->NowMs() + patience, status});
  RunAfter(loop_, patience + 1, [this](bool fired) {
    if (!fired) {  // this worker stops: nothing waits any more
      for (Parked& w : parked_) w.batch->Report(Aborted("the worker is stopping"));
      parked_.clear();
      return;
    }
    ExpireParked();
  });
  return true;
}

void KvClient::ExpireParked() {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  const uint64_t now = loop_->NowMs();
  std::vector<Parked> kept;
  for (Parked& w : parked_) {
    if (w.deadline_ms > now) {
      kept.push_back(std::move(w));
      continue;
    }
    w.batch->Report(w.why.WithContext(fmt::format(
        "{} '{}' partition {} on server {}: no backup took it over within {} ms", Verb(w.op.kind),
        map_.tensors()[w.op.tensor].name, w.p.part, w.server, failover_patience_.count())));
  }
  parked_ = std::move(kept);
}

void KvClient::FailParked(const Status& why) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  failover_stopped_ = true;
  std::vector<Parked> parked = std::move(parked_);
  parked_.clear();
  for (Parked& w : parked) w.batch->Report(why);
}

void KvClient::UseServerView(const ServerView& view) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (view.view <= view_) return;                     // an older view's answer came late
  if (view.owners.size() != servers_.size()) return;  // not this job's servers
  view_ = view.view;
  owners_ = view.owners;
  for (size_t t = 0; t < route_.size(); ++t)
    for (const Partition& p : map_.partitions(static_cast<int>(t))) {
      if (p.server >= static_cast<int>(view.owners.size())) continue;
      route_[t][p.part] = view.owners[static_cast<size_t>(p.server)];
      route_version_[t][p.part] = view.view;
    }
  // What is still in flight to the lost server fails now and goes where
  // its partition went (a stopped server would hold it until it woke).
  if (view.lost >= 0 && view.lost < static_cast<int>(servers_.size()) && servers_[view.lost])
    servers_[view.lost]->Close(
        Unavailable(fmt::format("server {} was lost; its backup took over", view.lost)));
  ResendParked([this](const Parked& w) { return route_[w.op.tensor][w.p.part] != w.server; });
}

void KvClient::ResendParked(const std::function<bool(const Parked&)>& routed) {
  std::vector<Parked> parked = std::move(parked_);
  parked_.clear();
  for (Parked& w : parked) {
    if (!routed(w)) {
      parked_.push_back(std::move(w));
      continue;
    }
    ++failover_retries_;
    IssuePart(w.op, w.p, w.batch, w.hops + 1);
  }
}

void KvClient::UseServerConnection(int rank, std::shared_ptr<Connection> conn) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (rank < 0 || rank >= static_cast<int>(servers_.size())) return;
  servers_[static_cast<size_t>(rank)] = std::move(conn);
  ResendParked([this, rank](const Parked& w) { return route_[w.op.tensor][w.p.part] == rank; });
}

void KvClient::Reroute(const KvOp& op, const Partition& p, const Moved& moved,
                       const std::shared_ptr<CountDown>& batch, int hops) {
  const std::string& name = map_.tensors()[op.tensor].name;
  auto fail = [&](const std::string& why) {
    batch->Report(
        Unavailable(fmt::format("{} '{}' partition {}: it moved to server {} "
                                "(placement {}), {}",
                                Verb(op.kind), name, p.part, moved.rank, moved.version, why)));
  };
  if (hops + 1 >= kMaxMovedHops)
    return fail(fmt::format("after {} moves while this request chased it", hops + 1));
  if (moved.rank >= static_cast<int>(servers_.size()) || !servers_[moved.rank] ||
      servers_[moved.rank]->closed())
    return fail("a server this worker has no connection to");
  // An older placement's answer does not undo a newer route.
  if (moved.version >= route_version_[op.tensor][p.part]) {
    route_[op.tensor][p.part] = moved.rank;
    route_version_[op.tensor][p.part] = moved.version;
  }
  ++moved_retries_;
  IssuePart(op, p, batch, hops + 1);
}

namespace {

// One move of KvClient::MovePartition, step by step on the loop, as
// roles/server/handoff.h lays out.
struct PartitionMove : std::enable_shared_from_this<PartitionMove> {
  Connection::Ptr from, to;
  int from_rank = 0, to_rank = 0;
  std::string tensor;
  Partition p;
  int64_t version = 0;
  std::function<void()> routed;  // the partition is on `to` now
  std::shared_ptr<CountDown> done;

  TakeOverRequest TakeOver(bool expect) const {
    return TakeOverRequest{tensor, p.part, version, expect, p.elements};
  }
  void Fail(const Status& st, const char* when) {
    done->Report(st.WithContext(fmt::format("moving '{}' partition {} from server {} to {}, {}",
                                            tensor, p.part, from_rank, to_rank, when)));
  }
  // 1. The new owner holds the partition's requests until its state comes.
  void Expect() {
    to->Call(TakeOver(true), [self = shared_from_this()](StatusOr<Incoming> reply) {
      if (!reply.ok()) return self->Fail(reply.status(), "announcing it");
      self->HandOff();
    });
  }
  // 2. The old owner gives it up: its state, and Moved from then on.
  void HandOff() {
    from->Call(HandOffRequest{tensor, p.part, to_rank, version},
               [self = shared_from_this()](StatusOr<Incoming> reply) {
                 if (!reply.ok()) {
                   self->to->Call(self->TakeOver(false), [](StatusOr<Incoming>) {});  // called off
                   return self->Fail(reply.status(), "handing it off");
                 }
                 self->Install(reply->payload);
               });
  }
  // 3. The new owner installs it and takes what it held. Should it refuse,
  // nothing is lost: the state goes back to the old owner, and what the new
  // one held is answered with an error.
  void Install(Buffer state) {
    Payload payload{state.data, static_cast<size_t>(state.size), state.owner};
    to->Call(
        TakeOver(false),
        [self = shared_from_this(), payload](StatusOr<Incoming> reply) {
          if (reply.ok()) {
            self->routed();
            return self->done->Report(Status::OK());
          }
          self->to->Call(self->TakeOver(false), [](StatusOr<Incoming>) {});
          self->from->Call(
              self->TakeOver(false), [](StatusOr<Incoming>) {}, payload);
          self->Fail(reply.status(), "installing it (it stays)");
        },
        payload);
  }
};

}  // namespace

Status KvClient::UseServers(std::vector<Connection::Ptr> servers) {
  Completion<Status> done;
  bool posted = loop_->Post([this, servers = std::move(servers), done]() mutable {
    for (const std::vector<int>& routes : route_)
      for (int r : routes)
        if (r >= static_cast<int>(servers.size()))
          return done.Set(FailedPrecondition(
              fmt::format("a partition is still routed to server {} of {}", r, servers.size())));
    servers_ = std::move(servers);
    server_count_ = static_cast<int>(servers_.size());
    done.Set(Status::OK());
  });
  if (!posted) return Aborted("the worker is stopping");
  return done.Wait();
}

Status KvClient::UsePlacement(const PartitionMap& placement, int64_t version) {
  Completion<Status> done;
  bool posted = loop_->Post([this, &placement, version, done] {
    if (placement.tensors().size() != map_.tensors().size())
      return done.Set(InvalidArgument("a placement of other tensors"));
    for (size_t t = 0; t < route_.size(); ++t) {
      const std::vector<Partition>& parts = placement.partitions(static_cast<int>(t));
      if (parts.size() != route_[t].size())
        return done.Set(InvalidArgument("a placement cut otherwise"));
      for (const Partition& p : parts) {
        if (p.server >= static_cast<int>(servers_.size()))
          return done.Set(InvalidArgument(fmt::format(
              "a placement on server {}; this worker knows {}", p.server, servers_.size())));
        route_[t][p.part] = p.server;
        route_version_[t][p.part] = version;
      }
    }
    done.Set(Status::OK());
  });
  if (!posted) return Aborted("the worker is stopping");
  return done.Wait();
}

KvHandle KvClient::MovePartition(int tensor, uint32_t part, int to_rank, int64_t version) {
  if (tensor < 0 || tensor >= static_cast<int>(map_.tensors().size()) ||
      part >= map_.partitions(tensor).size())
    return Failed(
        NotFound(fmt::format("move of tensor #{} partition {}: no such partition", tensor, part)));
  const std::string& name = map_.tensors()[tensor].name;
  if (to_rank < 0 || to_rank >= static_cast<int>(servers_.size()))
    return Failed(
        InvalidArgument(fmt::format("move of '{}' partition {} to server {}: this "
                                    "worker knows {} servers",
                                    name, part, to_rank, servers_.size())));
  KvHandle handle;
  auto move = std::make_shared<PartitionMove>();
  move->to_rank = to_rank;
  move->tensor = name;
  move->p = map_.partitions(tensor)[part];
  move->version = version;
  move->done = CountDown::Into(handle.done_, 1);
  move->routed = [this, tensor, part, to_rank, version, elements = move->p.elements] {
    ++moved_.partitions;
    moved_.bytes += elements * static_cast<int64_t>(sizeof(float));
    if (version < route_version_[tensor][part]) return;
    route_[tensor][part] = to_rank;
    route_version_[tensor][part] = version;
  };
  bool posted = loop_->Post([this, tensor, part, move] {
    PSTRAIN_DCHECK_ON_LOOP(loop_);
    move->from_rank = route_[tensor][part];
    if (move->from_rank == move->to_rank) return move->done->Report(Status::OK());
    move->from = servers_[move->from_rank];
    move->to = servers_[move->to_rank];
    move->Expect();
  });
  if (!posted) return Failed(Aborted("the worker is stopping"));
  return handle;
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
    const int patience = static_cast<int>(failover_patience_.count() / kSaveRetryMs);
    for (size_t r = 0; r < servers_.size(); ++r)
      SaveShard(step, static_cast<int>(r), files, batch, patience);
  });
  if (!posted) return Failed(Aborted("the worker is stopping"));
  return handle;
}

// `files` stays valid: the handle completes only after the last reply.
void KvClient::SaveShard(int64_t step, int rank, std::vector<std::string>* files,
                         const std::shared_ptr<CountDown>& batch, int retries) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  // Replicated: the server holding that rank's partitions writes its file.
  const int at = owners_.empty() ? rank : owners_[static_cast<size_t>(rank)];
  auto answer = [this, step, rank, at, files, batch, retries](StatusOr<Incoming> reply) {
    // Its server was lost: once a view names its heir, that one writes it.
    if (!reply.ok() && reply.status().code() == StatusCode::kUnavailable && retries > 0)
      return RunAfter(loop_, kSaveRetryMs, [this, step, rank, files, batch, retries](bool fired) {
        if (!fired) return batch->Report(Aborted("the worker is stopping"));
        SaveShard(step, rank, files, batch, retries - 1);
      });
    if (!reply.ok())
      return batch->Report(reply.status().WithContext(fmt::format("checkpoint on server {}", at)));
    if (auto* saved = std::get_if<SaveReply>(&reply->message.body))
      (*files)[static_cast<size_t>(rank)] = saved->file;
    batch->Report(Status::OK());
  };
  servers_[static_cast<size_t>(at)]->Call(
      SaveRequest{step, static_cast<int>(servers_.size()), owners_.empty() ? -1 : rank},
      std::move(answer));
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
