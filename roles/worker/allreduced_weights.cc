#include "roles/worker/allreduced_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "optim/momentum_correction.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {

StatusOr<std::unique_ptr<AllReducedWeights>> AllReducedWeights::Create(const Config& config,
                                                                       std::vector<Param*> params) {
  std::unique_ptr<AllReducedWeights> weights(new AllReducedWeights());
  weights->averaging_ = config.train.mode == UpdateMode::kAverage;
  std::vector<TensorView> grads, state, stats, synced;
  for (Param* p : params) {
    if (!p->trainable) {
      // A layer's own statistic: no gradient to average, no optimizer; its
      // value goes with the others (the chief's broadcast, checkpoints,
      // mode average's rounds) and with the other statistics (averaged at
      // checkpoints and epoch ends). One synced each step rides in the
      // gradients' buckets (their average is its average), or, in mode
      // average, where no gradient is reduced, in a round of its own.
      if (p->synced_each_step) {
        (weights->averaging_ ? synced : grads).push_back({p->value.ptr(), p->value.size()});
        if (!weights->averaging_) weights->dense_grad_floats_ += p->value.size();
      }
      stats.push_back({p->value.ptr(), p->value.size()});
      OptimizerConfig none;
      none.type = OptimizerType::kSgd;
      auto plain = MakeDenseOptimizer(none, static_cast<size_t>(p->value.size()));
      if (!plain.ok()) return plain.status().WithContext(p->name);
      state.push_back({p->value.ptr(), p->value.size()});
      weights->state_floats_ += p->value.size();
      weights->entries_.push_back({p, std::move(*plain), false, /*trainable=*/false});
      continue;
    }
    const CompressionConfig compression = CompressionFor(config, p->name);
    // Averaging sends weights, not gradients: nothing to encode.
    const bool compressed = !weights->averaging_ && compression.enabled() && p->grad.size() > 0;
    // A momentum-corrected tensor keeps its momentum in the encoders and
    // runs sgd here (roles/worker/compressed_allreduce.h), as a PS server does.
    const OptimizerConfig requested = OptimizerFor(config, p->name);
    const bool corrected = compressed && MomentumCorrected(config, p->name);
    OptimizerConfig applied = requested;
    if (corrected) applied.type = OptimizerType::kSgd;
    auto optimizer = MakeDenseOptimizer(applied, static_cast<size_t>(p->value.size()));
    if (!optimizer.ok()) return optimizer.status().WithContext(p->name);
    if (compressed) {
      weights->compressed_.Add(p, compression, corrected, requested.momentum, requested.nesterov);
    } else {
      grads.push_back({p->grad.ptr(), p->grad.size()});
      weights->dense_grad_floats_ += p->grad.size();
    }
    state.push_back({p->value.ptr(), p->value.size()});
    for (int k = 0; k < (*optimizer)->num_slots(); ++k)
      state.push_back({(*optimizer)->slot(k), p->value.size()});
    weights->state_floats_ += p->value.size() * (1 + (*optimizer)->num_slots());
    weights->entries_.push_back({p, std::move(*optimizer), compressed, /*trainable=*/true});
  }
  weights->grads_ = std::make_unique<TensorBuckets>(std::move(grads), kBucketBytes);
  weights->state_ = std::make_unique<TensorBuckets>(std::move(state), kBucketBytes);
  if (!stats.empty())
    weights->stats_ = std::make_unique<TensorBuckets>(std::move(stats), kBucketBytes);
  if (!synced.empty())
    weights->synced_stats_ = std::make_unique<TensorBuckets>(std::move(synced), kBucketBytes);
  return weights;
}

int64_t AllReducedWeights::elements() const {
  int64_t n = 0;
  for (const Entry& e : entries_)
    if (e.trainable) n += e.param->value.size();
  return n;
}

Status AllReducedWeights::BroadcastFromChief(Collective& collective, int64_t updates_done) {
  for (Entry& e : entries_) e.optimizer->set_steps(static_cast<uint64_t>(updates_done));
  PSTRAIN_RETURN_IF_ERROR(
      state_->Broadcast(collective, 0).WithContext("broadcasting the all-reduced weights"));
  if (compressed_.empty()) return Status::OK();
  // Worker 0 sends every worker's encoder state it loaded (none on a fresh
  // start); the others send nothing. The same rule on every worker: all
  // restore theirs, or (none loaded, or another worker count) none does.
  const int world = collective.world();
  std::vector<uint8_t> mine;
  if (collective.rank() == 0 && static_cast<int>(encoder_states_.size()) == world)
    for (const auto& state : encoder_states_) mine.insert(mine.end(), state.begin(), state.end());
  std::vector<std::vector<uint8_t>> all;
  PSTRAIN_RETURN_IF_ERROR(
      collective.AllGatherBytes(mine, &all, compressed_.StateBytes() * static_cast<uint64_t>(world))
          .WithContext("handing out the encoders' residuals"));
  encoder_states_.clear();
  encoder_states_step_ = -1;
  if (all[0].empty()) return Status::OK();
  const uint64_t each = compressed_.StateBytes();
  if (all[0].size() != each * static_cast<uint64_t>(world))
    return InvalidArgument(
        fmt::format("worker 0 sent {} bytes of encoder state, {} workers need {}", all[0].size(),
                    world, each * world));
  const auto first = all[0].begin() + static_cast<std::ptrdiff_t>(each * collective.rank());
  return compressed_
      .UnpackState(std::vector<uint8_t>(first, first + static_cast<std::ptrdiff_t>(each)))
      .WithContext(fmt::format("worker {}'s encoders", collective.rank()));
}

Status AllReducedWeights::GatherEncoderStates(Collective& collective, int64_t step) {
  if (compressed_.empty()) return Status::OK();
  PSTRAIN_RETURN_IF_ERROR(
      collective.AllGatherBytes(compressed_.PackState(), &encoder_states_, compressed_.StateBytes())
          .WithContext("gathering the encoders' residuals for the checkpoint"));
  encoder_states_step_ = step;
  return Status::OK();
}

Status AllReducedWeights::ReduceAndApply(Collective& collective, bool dense_reduced,
                                         bool average_due) {
  PSTRAIN_RETURN_IF_ERROR(Reduce(collective, dense_reduced));
  return ApplyReduced(collective, average_due);
}

Status AllReducedWeights::ApplyReduced(Collective& collective, bool average_due) {
  Apply();
  return averaging_ && average_due ? AverageWeights(collective) : Status::OK();
}

Status AllReducedWeights::Reduce(Collective& collective, bool dense_reduced) {
  ++steps_;
  if (averaging_) {  // each worker's own gradients
    if (synced_stats_)
      PSTRAIN_RETURN_IF_ERROR(synced_stats_->AllReduce(collective, ReduceOp::kAverage)
                                  .WithContext("averaging the synced statistics"));
    return Status::OK();
  }
  if (!dense_reduced && dense_grad_floats_ > 0) {
    PSTRAIN_RETURN_IF_ERROR(
        grads_->AllReduce(collective, ReduceOp::kAverage).WithContext("all-reducing gradients"));
    if (collective.world() > 1)
      collective_bytes_ += dense_grad_floats_ * static_cast<int64_t>(sizeof(float));
  }
  if (!compressed_.empty()) {
    const int64_t before = compressed_.counters().bytes;
    PSTRAIN_RETURN_IF_ERROR(compressed_.Exchange(collective));
    if (collective.world() > 1) collective_bytes_ += compressed_.counters().bytes - before;
  }
  return Status::OK();
}

Status AllReducedWeights::AverageWeights(Collective& collective) {
  PSTRAIN_RETURN_IF_ERROR(
      state_->AllReduce(collective, ReduceOp::kAverage).WithContext("averaging the weights"));
  if (collective.world() > 1)
    collective_bytes_ += state_floats_ * static_cast<int64_t>(sizeof(float));
  return Status::OK();
}

Status AllReducedWeights::AverageStatistics(Collective& collective) {
  if (!stats_) return Status::OK();
  return stats_->AllReduce(collective, ReduceOp::kAverage)
      .WithContext("averaging the layers' statistics");
}

void AllReducedWeights::Apply() {
  for (Entry& e : entries_)
    if (e.trainable) e.optimizer->Update(e.param->value.ptr(), e.param->grad.ptr());
}

double AllReducedWeights::SquaredGradNorm() const {
  double squares = 0;
  for (const Entry& e : entries_) {
    if (!e.trainable) continue;
    for (float g : e.param->grad.data) squares += static_cast<double>(g) * g;
  }
  return squares;
}

void AllReducedWeights::ScaleGrads(float factor) {
  for (Entry& e : entries_)
    if (e.trainable)
      for (float& g : e.param->grad.data) g *= factor;
}

bool AllReducedWeights::Contains(const Param* param) const {
  for (const Entry& e : entries_)
    if (e.param == param) return true;
  return false;
}

std::string AllReducedWeights::DescribeTraffic(const Traffic& before, const Traffic& now) const {
  const int64_t steps = std::max<int64_t>(now.steps - before.steps, 1);
  const double per_step =
      static_cast<double>(now.bytes - before.bytes) / static_cast<double>(steps);
  const double dense = static_cast<double>(elements()) * sizeof(float);
  std::string line = per_step > 0
                         ? fmt::format(
                               "all-reduced weights: {:.0f} bytes/step to the collectives, dense "
                               "gradients {:.0f} ({:.1f}x fewer)",
                               per_step, dense, dense / per_step)
                         : std::string("all-reduced weights: nothing sent (one worker)");
  const CompressionCounters& a = before.compression;
  const CompressionCounters& b = now.compression;
  if (b.elements > a.elements) {
    const std::vector<float> taus = compressed_.thresholds();
    line += fmt::format(
        ", density {:.2e}, tau {:.2e}..{:.2e}",
        static_cast<double>(b.sent - a.sent) / static_cast<double>(b.elements - a.elements),
        *std::min_element(taus.begin(), taus.end()), *std::max_element(taus.begin(), taus.end()));
  }
  return line;
}

bool AllReducedWeights::ReducesDense(const Param* param) const {
  if (averaging_) return false;
  for (const Entry& e : entries_)
    if (e.param == param) return e.trainable && !e.compressed;
  return false;
}

StatusOr<std::string> AllReducedWeights::Save(const std::string& step_dir, int64_t step) const {
  const std::string meta = fmt::format("step {}", step);
  std::vector<SectionView> sections = {{"meta", meta.data(), meta.size()}};
  for (const Entry& e : entries_) {
    const size_t bytes = static_cast<size_t>(e.param->value.size()) * sizeof(float);
    sections.push_back({e.param->name + "/value", e.param->value.ptr(), bytes});
    for (int k = 0; k < e.optimizer->num_slots(); ++k)
      sections.push_back(
          {e.param->name + "/" + e.optimizer->slot_name(k), e.optimizer->slot(k), bytes});
  }
  // The residuals of every worker, when gathered for this step (a job
  // stopped on request between checkpoints has none: they start at zero).
  std::vector<std::string> names;
  if (encoder_states_step_ == step)
    for (size_t r = 0; r < encoder_states_.size(); ++r)
      names.push_back(fmt::format("encoders/{}", r));
  for (size_t r = 0; r < names.size(); ++r)
    sections.push_back({names[r], encoder_states_[r].data(), encoder_states_[r].size()});
  PSTRAIN_RETURN_IF_ERROR(
      WriteCheckpointFile(step_dir + "/" + kAllReducedWeightsFileName, sections));
  return std::string(kAllReducedWeightsFileName);
}

Status AllReducedWeights::Load(const std::string& step_dir, int64_t step) {
  const std::string path = step_dir + "/" + kAllReducedWeightsFileName;
  auto sections = ReadCheckpointFile(path);
  if (!sections.ok()) return sections.status();
  const SectionsByName by_name = ByName(*sections);
  const std::string meta = fmt::format("step {}", step);
  auto found = by_name.find("meta");
  if (found == by_name.end() || std::string(found->second->begin(), found->second->end()) != meta)
    return InvalidArgument(fmt::format("{}: not the file of step {}", path, step));
  auto restore = [&](const std::string& name, float* into, int64_t n) -> Status {
    auto bytes = FindSection(by_name, name, static_cast<uint64_t>(n) * sizeof(float));
    if (!bytes.ok()) return bytes.status().WithContext(path);
    std::memcpy(into, (*bytes)->data(), (*bytes)->size());
    return Status::OK();
  };
  for (Entry& e : entries_) {
    const int64_t n = e.param->value.size();
    PSTRAIN_RETURN_IF_ERROR(restore(e.param->name + "/value", e.param->value.ptr(), n));
    for (int k = 0; k < e.optimizer->num_slots(); ++k)
      PSTRAIN_RETURN_IF_ERROR(
          restore(e.param->name + "/" + e.optimizer->slot_name(k), e.optimizer->slot(k), n));
  }
  // Every worker's encoders, checked when each worker unpacks its own.
  encoder_states_.clear();
  for (int r = 0;; ++r) {
    auto it = by_name.find(fmt::format("encoders/{}", r));
    if (it == by_name.end() || compressed_.empty()) break;
    if (it->second->size() != compressed_.StateBytes())
      return InvalidArgument(
          fmt::format("{}: section 'encoders/{}' has {} bytes, the model needs {}", path, r,
                      it->second->size(), compressed_.StateBytes()));
    encoder_states_.push_back(*it->second);
  }
  return Status::OK();
}

}  // namespace pstrain
