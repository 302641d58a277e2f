// DataRun: where a worker's training data goes from a step on: the batcher
// of its shard (its rank and the worker count) and the plan of the epochs
// from there (roles/checkpoint/worker_place.h). Made at the start, and again
// at a live change of workers (roles/worker/trainer_workers.cc).
#pragma once

#include <cstdint>
#include <memory>

#include "roles/checkpoint/worker_place.h"
#include "src/data/prefetcher.h"

namespace pstrain {

struct DataRun {
  std::unique_ptr<PrefetchingBatcher> batcher;
  EpochPlan plan;
  int64_t start = 0;  // the step the batcher enters its epoch at
  int64_t total = 0;  // the job's steps, as this plan counts them
};

}  // namespace pstrain
