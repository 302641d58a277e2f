// PsPartition: one partition of a PS-managed tensor on its server: the
// values, the optimizer and its state, and the update rule of the job's mode.
// Owned by exactly one server thread; nothing here locks.
//
// Clocks. A worker's clock is the step it is on. A partition's clock says
// which pulls it may answer (a pull carries min_clock):
//   sync  - the number of averaged updates applied. A step's update runs once
//           every worker's gradient for that step is in; pushes for any other
//           step are refused.
//   async - the number of pushes applied; pulls never wait (min_clock 0).
//   ssp   - the smallest number of pushes received from any one worker: a
//           worker pulling for step c asks for min_clock c - staleness, so it
//           waits while the slowest worker is more than `staleness` behind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/buffer.h"
#include "optim/dense_optimizer.h"
#include "src/common/config.h"
#include "src/common/tensor_memory.h"

namespace pstrain {

class PsPartition {
 public:
  // `values` are the initial weights (Init from the chief, or a checkpoint).
  PsPartition(std::string tensor, uint32_t part, int workers, UpdateMode mode,
              std::unique_ptr<DenseOptimizer> optimizer, std::vector<float> values);

  // Applies worker `worker`'s gradient for step `clock` according to the
  // mode. `grad` holds exactly size() floats. Refused (nothing changes) when
  // the worker or the step is not one this partition can take now.
  Status Push(int worker, int64_t clock, const float* grad);

  int64_t clock() const;
  size_t size() const { return optimizer_->size(); }
  const std::string& tensor() const { return tensor_; }
  uint32_t part() const { return part_; }
  // The current values, shared (not copied) with whoever sends them; an
  // update never writes into values someone still holds.
  std::shared_ptr<const FloatBuffer> values() const { return values_; }
  DenseOptimizer& optimizer() { return *optimizer_; }
  // Restores the counts of a checkpoint: `applied` updates, and `clock` (see
  // clock()) pushes from every worker.
  void RestoreClock(int64_t applied, int64_t clock);
  int64_t applied() const { return applied_; }

 private:
  FloatBuffer& WritableValues();
  void Apply(const float* grad);
  std::string Name() const;

  const std::string tensor_;
  const uint32_t part_;
  const int workers_;
  const UpdateMode mode_;
  std::unique_ptr<DenseOptimizer> optimizer_;
  std::shared_ptr<FloatBuffer> values_;  // tensor memory: huge pages when large
  int64_t applied_ = 0;                  // updates applied
  std::vector<int64_t> pushes_;          // per worker: gradients received
  // sync: the running sum of this step's gradients and who has sent one.
  FloatBuffer sum_;
  std::vector<bool> arrived_;
  int arrived_count_ = 0;
};

}  // namespace pstrain
