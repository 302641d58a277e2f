// TrainJob's requests to the servers for the PS weights each step: the
// pushes and pulls (threshold-encoded or averaged when so configured) and,
// with train.clip_norm, the norm asked between them
// (roles/worker/norm_clip.h).
#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "comm/ps/sparse_client.h"
#include "roles/worker/norm_clip.h"
#include "roles/worker/ps_averaging.h"
#include "roles/worker/ps_compression.h"
#include "roles/worker/remote_embeddings.h"
#include "roles/worker/trainer.h"

namespace pstrain {

std::vector<KvOp> TrainJob::PsRequests(WorkerContext& ctx, int64_t step) {
  const std::vector<Param*>& params = ps_params_;
  std::vector<KvOp> ops;
  ops.reserve(2 * params.size());
  if (ps_averaging_) {
    ps_averaging_->LocalStep();
    if (!AverageDue(step + 1)) return ops;  // nothing goes out
    const int64_t round = ps_averaging_->Round(step);
    for (size_t t = 0; t < params.size(); ++t) {
      const int tensor = static_cast<int>(t);
      ops.push_back({KvOp::Kind::kDelta, tensor, ps_averaging_->Delta(t), round});
      ops.push_back({KvOp::Kind::kPull, tensor, params[t]->value.ptr(), round + 1});
      ps_compression_->CountPush(tensor);
    }
    return ops;
  }
  for (size_t t = 0; t < params.size(); ++t) {
    const int tensor = static_cast<int>(t);
    KvOp push{KvOp::Kind::kPush, tensor, params[t]->grad.ptr(), step};
    if (ps_compression_->Compresses(tensor))
      push.encoded = ps_compression_->Encode(tensor, params[t]->grad.ptr());
    ps_compression_->CountPush(tensor);
    ops.push_back(push);
  }
  // With clipping the pulls wait for the factor (Clip); the norm goes instead.
  if (clip_) {
    if (!params.empty())
      for (const KvOp& norm : clip_->NormRequests(ctx.kv->map(), step)) ops.push_back(norm);
    return ops;
  }
  AddPulls(step, &ops);
  return ops;
}

void TrainJob::AddPulls(int64_t step, std::vector<KvOp>* ops) {
  const int64_t min_clock = MinClock(step);
  for (size_t t = 0; t < ps_params_.size(); ++t) {
    ops->push_back({KvOp::Kind::kPull, static_cast<int>(t), ps_params_[t]->value.ptr(), min_clock});
    ops->back().delta = delta_pulls_[t];
  }
}

void TrainJob::AfterPsRequests(int64_t step) {
  if (ps_averaging_ && AverageDue(step + 1)) ps_averaging_->Anchor(step + 1);
}

Status TrainJob::Clip(WorkerContext& ctx, int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  // Every table's rows were pushed (ExchangeLocalState): their servers hold the step.
  std::vector<const std::string*> tables;
  std::vector<double> table_shares;
  if (sparse_) {
    tables = embeddings_->TableNames();
    PSTRAIN_RETURN_IF_ERROR(sparse_->Norms(tables, step, &table_shares));
  }
  PSTRAIN_RETURN_IF_ERROR(clip_->Decide(allreduced_->SquaredGradNorm(), step, table_shares));
  if (clip_->clipped()) {
    allreduced_->ScaleGrads(clip_->factor());
    ++stats_.clipped_steps;
  }
  stats_.grad_norm = clip_->norm();
  if ((step + 1) % config_.train.log_every == 0)
    ctx.log->info("gradient norm {:.6g} at step {}{}; {} of {} steps clipped to {}", clip_->norm(),
                  step + 1,
                  clip_->clipped() ? fmt::format(", scaled by {:.6g}", clip_->factor()) : "",
                  stats_.clipped_steps, stats_.steps + 1, config_.train.clip_norm);
  // The PS factors and pulls fly while the tables take theirs; the handle
  // is waited for whatever happens (its requests read this job's memory).
  std::optional<KvHandle> pulled;
  if (!ps_params_.empty()) {
    std::vector<KvOp> ops = clip_->FactorRequests(static_cast<int>(ps_params_.size()), step);
    AddPulls(step, &ops);
    pulled = ctx.kv->Run(std::move(ops));
  }
  Status st = sparse_ ? sparse_->Clip(tables, step, clip_->factor()) : Status::OK();
  if (pulled) {
    Status kv = pulled->Wait();
    if (st.ok()) st = kv;
  }
  stats_.pull_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

}  // namespace pstrain
