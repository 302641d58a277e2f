// EvaluateCheckpoint: the test metric of the model a checkpoint holds, in
// this process, on the CPU, with no cluster: the model the config describes,
// every dense weight from the checkpoint, and the rows of server-held tables
// from the servers' shards (a row the checkpoint lacks takes the seeded
// initial value a server would give it: embedding/row_init.h). The test set
// runs as at a training epoch's end (roles/worker/trainer.h), so the metric is the
// one the training run that wrote the checkpoint logged.
#pragma once

#include <cstdint>
#include <string>

#include "src/common/config/config.h"
#include "src/common/status.h"

namespace pstrain {

struct CheckpointMetric {
  int64_t step = 0;   // of the checkpoint
  double metric = 0;  // accuracy, AUC or RMSE (TestMetric, src/data/metrics.h)
  // "test accuracy: 0.8123 (10000 samples)": the words and precision of
  // training's epoch-end line (TestMetric::Describe).
  std::string description;
};

StatusOr<CheckpointMetric> EvaluateCheckpoint(const Config& config, const std::string& dir);

}  // namespace pstrain
