// TrainReport: what a worker's training loop tells the people watching it:
// the samples/s and ETA appended to its step log lines, the lines of its
// metrics file (roles/node/metrics_log.h) and, on worker 0 with a terminal on
// stdout, the progress bar (roles/worker/progress_bar.h). The loop hands it its
// cumulative counters; the report keeps the previous snapshot and writes
// the differences, so every "step" line covers the interval since the one
// before. Owned and called by the training thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optim/threshold_codec.h"
#include "roles/node/metrics_log.h"
#include "roles/worker/progress_bar.h"
#include "src/common/logging.h"

namespace pstrain {

// Cumulative counts since this worker started training.
struct TrainCounters {
  int64_t samples = 0;
  double compute_s = 0, push_s = 0, pull_s = 0, allreduce_s = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;
  int64_t cache_ids = 0, cache_hits = 0;  // embedding ids looked up, found in a cache
  // Updates this worker sent (PS pushes, and the all-reduced weights'
  // threshold messages): bytes as sent, and as the same updates would have
  // gone dense. Equal when nothing is compressed.
  int64_t push_bytes = 0, push_dense_bytes = 0;
  // The threshold encoders' totals; min_tau..max_tau: their current range.
  CompressionCounters compression;
  // train.clip_norm: the last step's global gradient norm (-1: not
  // clipping) and the steps clipped so far.
  double grad_norm = -1;
  int64_t clipped_steps = 0;
};

class TrainReport {
 public:
  // `has_cache`: the worker has an embedding row cache (else the hit rate
  // is null). `start_step`: the steps done before this run (resume).
  TrainReport(const std::string& log_dir, int rank, const Logger& log, bool has_cache,
              int64_t start_step, int64_t total_steps);
  ~TrainReport() { Finish(); }
  TrainReport(const TrainReport&) = delete;
  TrainReport& operator=(const TrainReport&) = delete;

  // A live change of workers re-planned the job: it now ends at `total`.
  void SetTotal(int64_t total) { total_ = total; }
  // After every step: `step` global steps done (1-based). Moves the bar.
  void AfterStep(int64_t step, const TrainCounters& now);
  // Every train.log_every global steps and at the last: the metrics "step"
  // line, over the interval since the previous one.
  void WriteStep(int64_t step, int epoch, double loss, double lr, const TrainCounters& now);
  // What a step log line gets after the loss, over the interval since the
  // previous log line: ", 812 samples/s, ETA 1m23s", then, when updates are
  // threshold-encoded, ", pushed 1.2 KiB/step (dense 241.9 KiB, 201x), tau
  // 0.0012..0.0031, density 0.21%".
  std::string LogSuffix(int64_t step, const TrainCounters& now);
  // At an epoch end. `metric_name` null when this worker did not evaluate
  // (then the metrics are null too); a metric < 0: that set was not
  // measured (test_metric null, no validation_metric).
  void EpochLine(int64_t step, int epoch, double samples_per_s, const char* metric_name,
                 double test_metric, double validation_metric);
  // Ends the bar's line.
  void Finish();
  // Tests (PSTRAIN_TEST_SAMPLE_LOG): appends "generation step epoch sample"
  // to `path` for every sample trained (`step` 1-based, `epoch` 0-based), so
  // that a test can tell the steps a rollback redid.
  Status OpenSampleLog(const std::string& path);
  void Trained(int64_t generation, int64_t step, int epoch, const std::vector<int64_t>& sample_ids);

 private:
  using Clock = std::chrono::steady_clock;
  MetricsLog metrics_;
  ProgressBar bar_;
  const bool has_cache_;
  const int64_t start_step_;
  int64_t total_;
  const Clock::time_point begin_;
  // At the last metrics line, and at the last log line.
  Clock::time_point last_time_, last_log_time_;
  int64_t last_log_step_;
  TrainCounters last_;
  int64_t last_step_;  // at the last metrics line
  int64_t last_log_samples_ = 0;
  TrainCounters last_logged_;  // at the last log line
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> sample_log_{nullptr, &std::fclose};
};

}  // namespace pstrain
