// DataCache: the training, test and validation sets a worker process has read, kept
// across its runs (a rollback, an elastic job's change of shape), so that a
// run after the first does not read 1M rows again before its first step.
//
// A training set split by sample index is the whole file, the same for every
// rank and worker count; a worker's file shards are kept with the rank and
// worker count they were read for, and read again for others. Both are kept
// for one data config: another one reads afresh. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "src/common/config/model_config.h"
#include "src/common/mutex.h"
#include "src/common/status.h"
#include "src/data/dataset.h"

namespace pstrain {

class DataCache {
 public:
  StatusOr<std::shared_ptr<const Dataset>> Train(const DataConfig& config, int rank, int workers);
  StatusOr<std::shared_ptr<const Dataset>> Test(const DataConfig& config);
  StatusOr<std::shared_ptr<const Dataset>> Validation(const DataConfig& config);
  // Reads the training set now when it is split by sample index (it does not
  // depend on the rank then): a node joining an elastic job reads it before
  // it registers, not while the others wait for its first step. Errors are
  // left for the run to meet.
  void Preload(const DataConfig& config);

 private:
  // A data set read whole, and what it was read from.
  struct Kept {
    std::string key;
    std::shared_ptr<const Dataset> data;
  };
  StatusOr<std::shared_ptr<const Dataset>> Whole(const DataConfig& config,
                                                 const std::vector<std::string>& paths,
                                                 const char* which);

  Mutex mutex_;
  std::string train_key_ GUARDED_BY(mutex_);
  std::shared_ptr<const Dataset> train_ GUARDED_BY(mutex_);
  Kept test_ GUARDED_BY(mutex_), validation_ GUARDED_BY(mutex_);
};

}  // namespace pstrain
