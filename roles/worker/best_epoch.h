// BestEpoch: the chief's watch over the validation metric measured at each
// epoch's end, for train.early_stopping (stop when the metric has not
// improved on its best by more than min_delta for `patience` epochs in a
// row) and checkpoint.keep_best (which checkpoint to keep past `keep`).
//
// The metric is the early-stopping rule's (or, without one, the loss's own:
// accuracy, AUC or RMSE); accuracy and AUC improve upwards, log-loss and
// RMSE downwards. A first measurement is always the best so far.
//
// The best is recorded in BEST, a small text file in the checkpoint
// directory ("step N", "epoch E", "<metric> V" lines), which a resumed job
// reads back so that its patience counts from the same best.
// Threads: the training thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/common/config/config.h"
#include "src/common/status.h"
#include "src/data/metrics.h"

namespace pstrain {

class BestEpoch {
 public:
  explicit BestEpoch(const Config& config);

  // Whether the job watches the validation metric (train.early_stopping
  // or checkpoint.keep_best, both of which need data.validation).
  bool watching() const { return watching_; }
  // The metric's name ("accuracy", "logloss", ...), and its value in `m`.
  const std::string& metric() const { return metric_; }
  double ValueOf(const TestMetric& m) const;

  // Records epoch `epoch` (1-based), ending at `step` steps done, measured
  // at `value`; returns whether it is the best so far. A value that is not
  // finite (a diverged model's log-loss) is never the best.
  bool Record(int epoch, int64_t step, double value);
  bool WouldImprove(double value) const;
  // Whether the rule says stop now (never without train.early_stopping).
  bool ShouldStop() const;
  // Why it stops, for the log: "validation accuracy has not improved on
  // 0.9120 (epoch 3, step 1407) by more than 0.001 for 2 epochs".
  std::string WhyStop() const;

  bool has_best() const { return best_step_ >= 0; }
  int64_t best_step() const { return best_step_; }

  // BEST in `dir`; read back by Restore (a missing file: nothing to
  // restore; a damaged one: an error naming it, the state unchanged).
  Status Save(const std::string& dir) const;
  Status Restore(const std::string& dir, int64_t resumed_step, int resumed_epoch);

 private:
  bool Better(double value, double than) const;

  bool watching_ = false;
  std::string metric_;
  bool higher_is_better_ = true;
  std::optional<EarlyStoppingConfig> rule_;
  std::string job_;  // JobIdentityText: whose BEST a file is
  double best_ = 0;
  int best_epoch_ = 0;
  int64_t best_step_ = -1;
  int last_epoch_ = 0;  // of the last Record
};

}  // namespace pstrain
