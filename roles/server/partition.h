// PsPartition: one partition of a PS-managed tensor on its server: the
// values, the optimizer and its state, and the job's update rule
// (roles/server/update_core.h: when a push is applied, the clock pulls wait on).
// Owned by exactly one server thread; nothing here locks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/transport/buffer.h"
#include "optim/dense_optimizer.h"
#include "roles/server/update_core.h"
#include "src/common/config/config.h"
#include "src/common/tensor_memory.h"

namespace pstrain {

class PsPartition {
 public:
  // `values` are the initial weights (Init from the chief, or a checkpoint).
  PsPartition(std::string tensor, uint32_t part, int workers, UpdateMode mode,
              std::unique_ptr<DenseOptimizer> optimizer, std::vector<float> values);

  // Applies worker `worker`'s gradient for step `clock` according to the
  // mode (average: its weight delta for round `clock`, averaged over the
  // workers and added to the values, with no optimizer). `grad` holds exactly size() floats.
  // Refused (nothing changes) when the worker or the step is not one this partition can take now.
  // The caller then answers the pulls the new clock allows (core().AnswerReady).
  Status Push(int worker, int64_t clock, const float* grad);

  // A lost worker (roles/server/update_core.h): step `last` completes
  // without it, later ones are called off with `why`. The caller then
  // answers the pulls (core().AnswerReady).
  Status FinishWithout(int rank, int64_t last, const std::string& why);

  // The vector the last update gave the optimizer (mode average: added to
  // the values): valid until the next Push. A backup replays it
  // (roles/server/replication.h).
  const float* last_update() const { return last_update_; }
  // A backup's copy applies `update`, the primary's last_update() of an
  // update by `worker` (UpdateCore::Replay), with the same result bit for
  // bit. `update` holds exactly size() floats.
  Status Replay(int worker, const float* update);

  // train.clip_norm (roles/server/update_core.h): gathered steps are held
  // for their clip factor. Before the first push.
  void HoldForClip() { core_.HoldSteps(); }
  // The held step `step` applied times `clip` (UpdateCore::ApplyHeld). Its
  // squared norm, taken once the step is held, is core().HeldNorm's. The
  // caller then answers the pulls.
  Status Clip(int64_t step, float clip);

  int64_t clock() const { return core_.clock(); }
  size_t size() const { return optimizer_->size(); }
  const std::string& tensor() const { return tensor_; }
  const std::string& name() const { return name_; }  // for errors
  uint32_t part() const { return part_; }
  // The current values, shared (not copied) with whoever sends them; an
  // update never writes into values someone still holds.
  std::shared_ptr<const FloatBuffer> values() const { return values_; }
  DenseOptimizer& optimizer() { return *optimizer_; }
  UpdateCore& core() { return core_; }
  const UpdateCore& core() const { return core_; }
  // Restores the counts of a checkpoint: `applied` updates, and `clock`
  // pushes from every worker.
  void RestoreClock(int64_t applied, int64_t clock) { core_.Restore(applied, clock); }
  int64_t applied() const { return core_.applied(); }

 private:
  FloatBuffer& WritableValues();
  void Apply(const float* grad);
  // Sync: the step's gathered sum times `scale`, then `clip`, applied.
  Status ApplySum(float scale, float clip = 1.0f);

  const std::string tensor_;
  const uint32_t part_;
  const std::string name_;  // for errors: "'fc.weight' partition 2"
  std::unique_ptr<DenseOptimizer> optimizer_;
  std::shared_ptr<FloatBuffer> values_;  // tensor memory: huge pages when large
  FloatBuffer sum_;     // sync, average: the running sum of this step's gradients (deltas)
  const bool average_;  // mode average: updates are weight deltas
  const float* last_update_ = nullptr;
  UpdateCore core_;
};

}  // namespace pstrain
