#include "roles/train_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace pstrain {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

TrainReport::TrainReport(const std::string& log_dir, int rank, const Logger& log, bool has_cache,
                         int64_t start_step, int64_t total_steps)
    : metrics_(log_dir, "worker", rank, log),
      // Only worker 0 draws: several bars on one terminal would fight.
      bar_(rank == 0 ? stdout : nullptr),
      has_cache_(has_cache),
      start_step_(start_step),
      total_(total_steps),
      begin_(Clock::now()),
      last_time_(begin_),
      last_log_time_(begin_),
      last_log_step_(start_step) {}

void TrainReport::AfterStep(int64_t step, const TrainCounters& now) {
  if (!bar_.active()) return;
  // The bar shows the run's average rate: steadier than the last step's.
  const double elapsed = Seconds(Clock::now() - begin_);
  const int64_t run_steps = step - start_step_;
  const double step_s = run_steps > 0 ? elapsed / static_cast<double>(run_steps) : 0;
  const double rate = elapsed > 0 ? static_cast<double>(now.samples) / elapsed : 0;
  bar_.Update(step, total_, rate, EtaSeconds(total_ - step, step_s));
}

std::string TrainReport::LogSuffix(int64_t step, const TrainCounters& now) {
  const Clock::time_point t = Clock::now();
  const double interval = std::max(Seconds(t - last_log_time_), 1e-9);
  const int64_t steps = step - last_log_step_;
  const double rate = static_cast<double>(now.samples - last_log_samples_) / interval;
  const double eta = EtaSeconds(total_ - step, steps > 0 ? interval / steps : 0);
  last_log_time_ = t;
  last_log_step_ = step;
  last_log_samples_ = now.samples;
  return fmt::format(", {:.0f} samples/s, ETA {}", rate, FormatDuration(eta));
}

void TrainReport::WriteStep(int64_t step, int epoch, double loss, double lr,
                            const TrainCounters& now) {
  const Clock::time_point t = Clock::now();
  const double interval = std::max(Seconds(t - last_time_), 1e-9);
  const double rate = static_cast<double>(now.samples - last_.samples) / interval;
  nlohmann::ordered_json line;
  line["step"] = step;
  line["epoch"] = epoch;
  line["loss"] = loss;
  line["lr"] = lr;
  line["samples_per_s"] = rate;
  line["compute_s"] = now.compute_s - last_.compute_s;
  line["push_s"] = now.push_s - last_.push_s;
  line["pull_s"] = now.pull_s - last_.pull_s;
  line["allreduce_s"] = now.allreduce_s - last_.allreduce_s;
  line["bytes_sent"] = now.bytes_sent - last_.bytes_sent;
  line["bytes_received"] = now.bytes_received - last_.bytes_received;
  const int64_t ids = now.cache_ids - last_.cache_ids;
  if (has_cache_ && ids > 0) {
    line["cache_hit_rate"] =
        static_cast<double>(now.cache_hits - last_.cache_hits) / static_cast<double>(ids);
  } else {
    line["cache_hit_rate"] = nullptr;
  }
  metrics_.Write("step", line);
  last_time_ = t;
  last_ = now;
}

void TrainReport::EpochLine(int64_t step, int epoch, double samples_per_s,
                            const char* test_metric_name, double test_metric) {
  nlohmann::ordered_json line;
  line["step"] = step;
  line["epoch"] = epoch;
  line["samples_per_s"] = samples_per_s;
  if (test_metric_name != nullptr) {
    line["test_metric_name"] = test_metric_name;
    line["test_metric"] = test_metric;
  } else {
    line["test_metric_name"] = nullptr;
    line["test_metric"] = nullptr;
  }
  metrics_.Write("epoch", line);
}

void TrainReport::Finish() { bar_.Finish(); }

}  // namespace pstrain
