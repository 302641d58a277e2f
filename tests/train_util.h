// Helpers shared by the training suites: run a whole job in this process
// and keep what the chief saw.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "roles/local_job.h"
#include "roles/worker/trainer.h"
#include "tests/test_util.h"

namespace pstrain::testing {

// The repository's file `relative` ("configs/x.yaml").
std::string RepoPath(const std::string& relative);

struct TrainOutcome {
  Status status;
  TrainStats stats;                         // the chief's
  std::vector<std::vector<float>> weights;  // the chief's, in params() order
  std::shared_ptr<CaptureSink> sink = std::make_shared<CaptureSink>();  // every node's log
};

// A local job of `config` on `servers` and `workers` (threads of this
// process) whose nodes all log into `sink`; the caller sets make_job.
LocalJobOptions QuietJob(const Config& config, int servers, int workers,
                         const std::shared_ptr<CaptureSink>& sink);

// Runs a local job of `config` (servers and workers as threads).
// `before_run(rank)`, when given, runs on each worker's thread after the
// start barrier, before it trains (a test makes a worker late with it).
TrainOutcome TrainLocally(const Config& config, int servers, int workers,
                          const std::string& ring_transport = "auto",
                          std::function<void(int rank)> before_run = {});

// `config` trained in two jobs: the first stops after `stop_at` steps,
// checkpointing every `every` steps into `checkpoint_dir`; the second
// resumes from there and runs to config.train.steps.
struct ResumedRun {
  TrainOutcome first, resumed;
};
ResumedRun TrainInTwoJobs(const Config& config, int servers, int workers, int64_t stop_at,
                          int64_t every, const std::string& checkpoint_dir);

// Synthetic click data (pstrain gen criteo) in 2 shards, train.txt-0000<i>,
// and test.txt, in a fresh directory removed at the end.
struct ClickData {
  explicit ClickData(int64_t rows = 20000, int64_t test_rows = 2000);
  ~ClickData();
  std::string dir;
};

// configs/lr_criteo.yaml (logistic regression) on `data`'s train.txt and
// test.txt: a 65536-id vocabulary, batch 128, `steps` steps.
Config ClickLrConfig(const ClickData& data, int64_t steps);

// The largest difference between two outcomes' weights (same model), from
// the `first`-th Param on (a server-held table's model holds a batch's rows
// only: a caller leaves the tables out).
double LargestDifference(const TrainOutcome& a, const TrainOutcome& b, size_t first = 0);

}  // namespace pstrain::testing
