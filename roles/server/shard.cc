#include "roles/server/shard.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "optim/momentum_correction.h"
#include "optim/threshold_codec.h"

namespace pstrain {

namespace {

ErrorReply PullSizeError(int64_t elements, const PsPartition& partition) {
  return ErrorReply{fmt::format("pull of {} floats from '{}' partition {}, which holds {}",
                                elements, partition.tensor(), partition.part(), partition.size())};
}

}  // namespace

PsShard::PsShard(const Config* config, int workers, Logger log, Executor run)
    : config_(config), workers_(workers), log_(std::move(log)), run_(std::move(run)) {
  if (!run_) {
    thread_ = std::make_unique<WorkThread>();
    run_ = [thread = thread_.get()](std::function<void()> fn) { thread->Post(std::move(fn)); };
  }
}

StatusOr<std::unique_ptr<PsPartition>> PsShard::Make(const Key& key, std::vector<float> values) {
  // A momentum-corrected tensor's momentum runs on the workers (optim/momentum_correction.h).
  auto optimizer = MakeDenseOptimizer(CorrectedOptimizerFor(*config_, key.first), values.size());
  if (!optimizer.ok())
    return optimizer.status().WithContext(fmt::format("optimizer of '{}'", key.first));
  auto partition =
      std::make_unique<PsPartition>(key.first, key.second, workers_, config_->train.mode,
                                    std::move(*optimizer), std::move(values));
  if (config_->train.clip_norm > 0) {
    // A backup replays applied updates; a held step's would wait for an
    // ack its factor cannot come before (refused in the config too).
    if (config_->train.replication.replicas > 0)
      return FailedPrecondition("train.clip_norm does not work with train.replication yet");
    partition->HoldForClip();
  }
  return partition;
}

Status PsShard::Create(const Key& key, std::vector<float> values, PsPartition** out) {
  auto partition = Make(key, std::move(values));
  if (!partition.ok()) return partition.status();
  *out = partition->get();
  partitions_[key] = std::move(*partition);
  return Status::OK();
}

PartitionSnapshot PsShard::SnapshotOf(PsPartition& p) {
  const FloatBuffer& values = *p.values();
  PartitionSnapshot s{p.tensor(),
                      p.part(),
                      p.applied(),
                      p.clock(),
                      p.optimizer().steps(),
                      std::vector<float>(values.begin(), values.end()),
                      {}};
  DenseOptimizer& opt = p.optimizer();
  for (int k = 0; k < opt.num_slots(); ++k)
    s.slots.emplace_back(opt.slot_name(k),
                         std::vector<float>(opt.slot(k), opt.slot(k) + opt.size()));
  return s;
}

void PsShard::Push(PushRequest request, Buffer payload, Reply reply) {
  run_([this, request = std::move(request), payload = std::move(payload),
        reply = std::move(reply)]() mutable { Take(request, payload, reply); });
}

void PsShard::Take(PushRequest& request, Buffer& payload, Reply& reply) {
  Key key{request.tensor, request.part};
  auto it = partitions_.find(key);
  const float* data = reinterpret_cast<const float*>(payload.data);
  const size_t n = payload.size / sizeof(float);
  if (request.kind == PushKind::kInit) {
    if (payload.size % sizeof(float) != 0)
      return reply(ErrorReply{fmt::format("init of '{}' partition {}: {} bytes is not whole floats",
                                          request.tensor, request.part, payload.size)},
                   {});
    if (n == 0)
      return reply(ErrorReply{fmt::format("init of '{}' partition {} with no values",
                                          request.tensor, request.part)},
                   {});
    if (it == partitions_.end()) {
      PsPartition* created = nullptr;
      Status st;
      try {
        st = Create(key, std::vector<float>(data, data + n), &created);
      } catch (const std::bad_alloc&) {
        st = Unavailable(fmt::format("init of '{}' partition {} ({} bytes): out of memory",
                                     request.tensor, request.part, payload.size));
      }
      if (!st.ok()) return reply(ErrorReply{st.message()}, {});
      if (ReplicationQueue* queue = QueueOf(key)) {
        SendState(*created, *queue);
        queue->AfterSent(AckOnceHeld(std::move(reply)));
        Arrived(key, *created);
        return;
      }
      Arrived(key, *created);
    }
    return reply(Ack{}, {});
  }
  if (it == partitions_.end()) {
    if (auto held = expected_.find(key); held != expected_.end()) {
      if (held->second.size() >= kMaxHeldPushes)
        return reply(ErrorReply{fmt::format("push to '{}' partition {}: {} pushes already wait "
                                            "for its move to this server",
                                            request.tensor, request.part, kMaxHeldPushes)},
                     {});
      held->second.push_back({std::move(request), std::move(payload), std::move(reply)});
      return;
    }
    return reply(ErrorReply{fmt::format("push to unknown tensor '{}' partition {}: not "
                                        "initialized on this server",
                                        request.tensor, request.part)},
                 {});
  }
  PsPartition& partition = *it->second;
  if (std::string why = KindRefusal(request); !why.empty()) return reply(ErrorReply{why}, {});
  if (request.kind == PushKind::kClipScale) return TakeClip(partition, request, payload, reply);
  if (request.encoding == PushEncoding::kThreshold) {
    // Checked whole before anything is written: a bad message leaves the
    // scratch (and so the partition) as it was.
    scratch_.assign(partition.size(), 0.0f);
    Status decoded = DecodeThresholdAdd(
        payload.data, payload.size, static_cast<int64_t>(partition.size()), 1.0f, scratch_.data());
    if (!decoded.ok())
      return reply(ErrorReply{fmt::format("threshold-encoded push to '{}' partition {} ({} "
                                          "floats): {}",
                                          request.tensor, request.part, partition.size(),
                                          decoded.message())},
                   {});
    data = scratch_.data();
  } else if (n != partition.size() || payload.size % sizeof(float) != 0) {
    return reply(ErrorReply{fmt::format("push of {} bytes to '{}' partition {}, which holds {} "
                                        "floats ({} bytes)",
                                        payload.size, request.tensor, request.part,
                                        partition.size(), partition.size() * sizeof(float))},
                 {});
  }
  ReplicationQueue* queue = QueueOf(key);
  if (queue != nullptr && IsResentStep(partition, request)) {
    queue->AfterSent(AckOnceHeld(std::move(reply)));
    return;
  }
  const int64_t applied_before = partition.applied();
  Status st = partition.Push(request.worker, request.clock, data);
  if (!st.ok()) return reply(ErrorReply{st.message()}, {});
  if (queue != nullptr) return AckReplicated(partition, *queue, applied_before, std::move(reply));
  // The ack first: the pusher is waiting on it, while the pulls it frees
  // are another worker's (sync 4 KiB push+pull with 2 workers: 0.24 ms
  // answering them first, 0.18 ms after).
  reply(Ack{}, {});
  partition.core().AnswerReady();
}

void PsShard::TakeClip(PsPartition& partition, const PushRequest& request, const Buffer& payload,
                       const Reply& reply) {
  float clip = 0;
  if (payload.size != sizeof clip)
    return reply(ErrorReply{fmt::format("clip factor for '{}' partition {}: {} bytes, expected {}",
                                        request.tensor, request.part, payload.size, sizeof clip)},
                 {});
  std::memcpy(&clip, payload.data, sizeof clip);
  Status st = partition.Clip(request.clock, clip);
  if (!st.ok()) return reply(ErrorReply{st.message()}, {});
  reply(Ack{}, {});
  partition.core().AnswerReady();
}

// Mode average takes weight deltas, every other mode gradients; a clip
// factor needs train.clip_norm: a worker configured otherwise than this
// server is told so.
std::string PsShard::KindRefusal(const PushRequest& request) const {
  if (request.kind == PushKind::kClipScale && !(config_->train.clip_norm > 0))
    return fmt::format(
        "clip factor for '{}' partition {}: this server's config sets no "
        "train.clip_norm",
        request.tensor, request.part);
  const bool average = config_->train.mode == UpdateMode::kAverage;
  if (average == (request.kind == PushKind::kDelta)) return "";
  return fmt::format("push of a {} to '{}' partition {}: this server runs train.mode {}",
                     request.kind == PushKind::kDelta ? "weight delta" : "gradient", request.tensor,
                     request.part, average ? "average (weight deltas only)" : "without averaging");
}

void PsShard::Pull(PullRequest request, Reply reply) {
  run_([this, request = std::move(request), reply = std::move(reply)]() mutable {
    Key key{request.tensor, request.part};
    auto it = partitions_.find(key);
    // Not initialized yet: wait, never answer with values the worker should
    // not see.
    if (it == partitions_.end()) {
      before_init_[key].emplace_back(std::move(request), std::move(reply));
      return;
    }
    PullFrom(*it->second, request, std::move(reply));
  });
}

void PsShard::PullFrom(PsPartition& partition, const PullRequest& request, Reply reply) {
  ReplicationQueue* queue = QueueOf({partition.tensor(), partition.part()});
  if (queue == nullptr || queue->caught_up()) return PullNow(partition, request, std::move(reply));
  queue->AfterSent([this, request, reply = std::move(reply)](const Status& sent) {
    if (!sent.ok()) return reply(ErrorReply{sent.message()}, {});
    auto it = partitions_.find({request.tensor, request.part});
    if (it == partitions_.end())
      return reply(ErrorReply{fmt::format("'{}' partition {} is no longer on this server",
                                          request.tensor, request.part)},
                   {});
    PullNow(*it->second, request, reply);
  });
}

void PsShard::PullNow(PsPartition& partition, const PullRequest& request, Reply reply) {
  if (partition.size() != static_cast<size_t>(request.elements))
    return reply(PullSizeError(request.elements, partition), {});
  if (request.accept_delta && (request.worker < 0 || request.worker >= workers_))
    return reply(
        ErrorReply{fmt::format("pull of '{}' partition {} for worker {}: this job has {}",
                               partition.tensor(), partition.part(), request.worker, workers_)},
        {});
  if (request.norm) return PullNorm(partition, request, std::move(reply));
  // A pull waiting for a step called off (a lost worker) is refused.
  // A dense pull (every pull of most jobs) waits holding only its reply.
  if (!request.accept_delta)
    return partition.core().AnswerAt(
        request.min_clock, [&partition, reply = std::move(reply)](const std::string* refused) {
          if (refused != nullptr) return reply(ErrorReply{*refused}, {});
          Answer(partition, reply);
        });
  partition.core().AnswerAt(
      request.min_clock,
      [this, &partition, request, reply = std::move(reply)](const std::string* refused) {
        if (refused != nullptr) return reply(ErrorReply{*refused}, {});
        AnswerDelta(partition, request, reply);
      });
}

void PsShard::PullNorm(PsPartition& partition, const PullRequest& request, Reply reply) {
  if (!(config_->train.clip_norm > 0))
    return reply(ErrorReply{fmt::format("norm of '{}' partition {}: this server's config sets no "
                                        "train.clip_norm",
                                        partition.tensor(), partition.part())},
                 {});
  partition.core().AnswerHeldAt(
      request.min_clock,
      [&partition, step = request.min_clock, reply = std::move(reply)](const std::string* refused) {
        if (refused != nullptr) return reply(ErrorReply{*refused}, {});
        StatusOr<double> squares = partition.core().HeldNorm(step, partition.name());
        if (!squares.ok()) return reply(ErrorReply{squares.status().message()}, {});
        PullReply answer{partition.clock()};
        answer.squared_norm = *squares;
        reply(answer, {});
      });
}

void PsShard::AnswerDelta(PsPartition& partition, const PullRequest& request, const Reply& reply) {
  Key key{partition.tensor(), partition.part()};
  auto it = pull_deltas_.find(key);
  if (it == pull_deltas_.end()) {
    const CompressionConfig compression = CompressionFor(*config_, partition.tensor());
    if (!compression.enabled() || !(compression.pull_density > 0))
      return reply(ErrorReply{fmt::format("compressed pull of '{}' partition {}: this server's "
                                          "config sets no compression.pull_density for it",
                                          partition.tensor(), partition.part())},
                   {});
    auto deltas = std::make_unique<PullDeltas>(workers_, static_cast<int64_t>(partition.size()),
                                               compression.pull_density);
    it = pull_deltas_.emplace(key, std::move(deltas)).first;
  }
  auto [answer, payload] = it->second->Answer(request, partition.clock(), partition.values());
  reply(answer, std::move(payload));
}

void PsShard::Answer(const PsPartition& partition, const Reply& reply) {
  std::shared_ptr<const FloatBuffer> values = partition.values();
  Payload payload{reinterpret_cast<const uint8_t*>(values->data()), values->size() * sizeof(float),
                  values};
  reply(PullReply{partition.clock()}, std::move(payload));
}

void PsShard::Snapshot(std::function<void(std::vector<PartitionSnapshot>)> done, int origin) {
  run_([this, done = std::move(done), origin] {
    std::vector<PartitionSnapshot> out;
    for (auto& [key, p] : partitions_)
      if (origin < 0 || OriginOf(key) == origin) out.push_back(SnapshotOf(*p));
    done(std::move(out));
  });
}

void PsShard::Restore(std::vector<PartitionSnapshot> partitions, std::function<void(Status)> done) {
  run_([this, partitions = std::move(partitions), done = std::move(done)]() mutable {
    for (PartitionSnapshot& s : partitions) {
      Status st = Install(s);
      if (!st.ok()) return done(st.WithContext("checkpoint"));
    }
    done(Status::OK());
  });
}

Status PsShard::Install(PartitionSnapshot& s, const UpdateCore::State* core) {
  Key key{s.tensor, s.part};
  if (partitions_.count(key))
    return FailedPrecondition(fmt::format("'{}' partition {} is already here", s.tensor, s.part));
  PsPartition* p = nullptr;
  PSTRAIN_RETURN_IF_ERROR(Create(key, std::move(s.values), &p));
  Status st = RestoreState(*p, s, core);
  if (!st.ok()) {
    partitions_.erase(key);  // a bad state leaves nothing behind
    return st;
  }
  if (ReplicationQueue* queue = QueueOf(key)) SendState(*p, *queue);
  Arrived(key, *p);
  return Status::OK();
}

Status PsShard::RestoreState(PsPartition& p, const PartitionSnapshot& s,
                             const UpdateCore::State* core) {
  DenseOptimizer& opt = p.optimizer();
  if (static_cast<int>(s.slots.size()) != opt.num_slots())
    return InvalidArgument(
        fmt::format("'{}' partition {} has {} optimizer slots, the optimizer "
                    "has {}",
                    s.tensor, s.part, s.slots.size(), opt.num_slots()));
  for (int k = 0; k < opt.num_slots(); ++k) {
    if (s.slots[k].second.size() != opt.size() || s.slots[k].first != opt.slot_name(k))
      return InvalidArgument(fmt::format("'{}' partition {}: optimizer slot {} does not match",
                                         s.tensor, s.part, s.slots[k].first));
    std::memcpy(opt.slot(k), s.slots[k].second.data(), opt.size() * sizeof(float));
  }
  opt.set_steps(s.optimizer_steps);
  p.RestoreClock(s.applied, s.clock);
  if (core == nullptr) return Status::OK();
  return p.core().Load(*core).WithContext(fmt::format("'{}' partition {}", s.tensor, s.part));
}

void PsShard::Arrived(const Key& key, PsPartition& partition) {
  if (auto waiting = before_init_.find(key); waiting != before_init_.end()) {
    auto pulls = std::move(waiting->second);
    before_init_.erase(waiting);
    for (auto& [pull, pull_reply] : pulls) PullFrom(partition, pull, std::move(pull_reply));
  }
  if (auto held = expected_.find(key); held != expected_.end()) {
    auto pushes = std::move(held->second);
    expected_.erase(held);
    // Now and in arrival order, before any push that came after them.
    for (HeldPush& h : pushes) Take(h.request, h.payload, h.reply);
  }
}

void PsShard::HandOff(const std::string& tensor, uint32_t part,
                      std::function<void(StatusOr<MovedPartition>)> done) {
  run_([this, key = Key{tensor, part}, done = std::move(done)] {
    auto it = partitions_.find(key);
    if (it == partitions_.end())
      return done(
          NotFound(fmt::format("'{}' partition {} is not on this server", key.first, key.second)));
    PsPartition& p = *it->second;
    if (p.core().waiting() > 0)
      return done(FailedPrecondition(
          fmt::format("'{}' partition {}: {} pulls wait on it; it moves between a step's pull and "
                      "the next push",
                      key.first, key.second, p.core().waiting())));
    if (p.core().mid_step())
      return done(FailedPrecondition(
          fmt::format("'{}' partition {}: some gradients of step {} are in, not yet applied; it "
                      "moves between steps",
                      key.first, key.second, p.clock())));
    PartitionSnapshot s = SnapshotOf(p);
    UpdateCore::State core = p.core().Save();
    partitions_.erase(it);
    // The workers' views of its compressed pulls stay with this server: the
    // new owner answers their next pull dense (roles/server/pull_deltas.h).
    pull_deltas_.erase(key);
    done(MovedPartition{std::move(s), std::move(core)});
  });
}

void PsShard::Expect(const std::string& tensor, uint32_t part) {
  run_([this, key = Key{tensor, part}] {
    if (!partitions_.count(key)) expected_[key];  // an empty list: held from now on
  });
}

void PsShard::CallOff(const std::string& tensor, uint32_t part, const std::string& why) {
  run_([this, key = Key{tensor, part}, why] {
    if (auto held = expected_.find(key); held != expected_.end()) {
      for (HeldPush& h : held->second) h.reply(ErrorReply{why}, {});
      expected_.erase(held);
    }
    if (auto waiting = before_init_.find(key); waiting != before_init_.end()) {
      for (auto& [pull, reply] : waiting->second) reply(ErrorReply{why}, {});
      before_init_.erase(waiting);
    }
  });
}

void PsShard::LoseWorker(int rank, int64_t last, const std::string& why,
                         std::function<void(StatusOr<int64_t>)> done) {
  run_([this, rank, last, why, done = std::move(done)] {
    int64_t held = -1;
    for (auto& [key, p] : partitions_) {
      if (last < 0) {
        StatusOr<int64_t> step = p->core().Lose(rank);
        if (!step.ok()) return done(step.status());
        p->core().AnswerReady();  // ssp: the pulls it held back
        held = std::max(held, *step);
        continue;
      }
      Status st = p->FinishWithout(rank, last, why);
      p->core().AnswerReady();
      if (!st.ok()) return done(st);
    }
    done(last < 0 ? held : last);
  });
}

void PsShard::ChangeWorkers(int64_t step, std::vector<int> ranks, int workers,
                            std::function<void(const Status&)> done) {
  run_([this, step, ranks = std::move(ranks), workers, done = std::move(done)] {
    workers_ = workers;
    for (auto& [key, p] : partitions_) {
      Status st = p->core().Renumber(step, ranks, workers);
      if (!st.ok())
        return done(st.WithContext(fmt::format("'{}' partition {}", key.first, key.second)));
    }
    done(Status::OK());
  });
}

void PsShard::TakeOver(MovedPartition state, std::function<void(Status)> done) {
  run_([this, state = std::move(state), done = std::move(done)]() mutable {
    done(Install(state.partition, &state.core));
  });
}

}  // namespace pstrain
