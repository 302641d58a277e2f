#include "roles/worker/train_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace pstrain {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string Bytes(double bytes) {
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024);
  return fmt::format("{:.1f} MiB", bytes / (1024 * 1024));
}

// Density of the messages between two snapshots.
double Density(const CompressionCounters& now, const CompressionCounters& before) {
  const int64_t elements = now.elements - before.elements;
  return elements > 0 ? static_cast<double>(now.sent - before.sent) / elements : 0.0;
}

// ", pushed 1.2 KiB/step (dense 241.9 KiB, 201x), tau 0.0012..0.0031, density 0.21%"
std::string CompressionText(const TrainCounters& now, const TrainCounters& before, int64_t steps) {
  const double pushed = static_cast<double>(now.push_bytes - before.push_bytes) / steps;
  const double dense = static_cast<double>(now.push_dense_bytes - before.push_dense_bytes) / steps;
  return fmt::format(", pushed {}/step (dense {}, {:.0f}x), tau {:.3g}..{:.3g}, density {:.3g}%",
                     Bytes(pushed), Bytes(dense), pushed > 0 ? dense / pushed : 0.0,
                     now.compression.min_tau, now.compression.max_tau,
                     100 * Density(now.compression, before.compression));
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
      last_log_step_(start_step),
      last_step_(start_step) {}

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
  std::string text = fmt::format(", {:.0f} samples/s, ETA {}", rate, FormatDuration(eta));
  if (steps > 0 && now.compression.messages > last_logged_.compression.messages)
    text += CompressionText(now, last_logged_, steps);
  last_logged_ = now;
  return text;
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
  // Per step of the interval: what the updates sent, what they
  // would have sent dense, and the threshold encoders' state (null: none).
  const int64_t steps = std::max<int64_t>(step - last_step_, 1);
  line["push_bytes_per_step"] = static_cast<double>(now.push_bytes - last_.push_bytes) / steps;
  line["push_dense_bytes_per_step"] =
      static_cast<double>(now.push_dense_bytes - last_.push_dense_bytes) / steps;
  if (now.compression.messages > last_.compression.messages) {
    line["tau_min"] = now.compression.min_tau;
    line["tau_max"] = now.compression.max_tau;
    line["density"] = Density(now.compression, last_.compression);
  } else {
    for (const char* key : {"tau_min", "tau_max", "density"}) line[key] = nullptr;
  }
  const int64_t ids = now.cache_ids - last_.cache_ids;
  if (has_cache_ && ids > 0) {
    line["cache_hit_rate"] =
        static_cast<double>(now.cache_hits - last_.cache_hits) / static_cast<double>(ids);
  } else {
    line["cache_hit_rate"] = nullptr;
  }
  // Only with train.clip_norm: older readers see the lines they knew.
  if (now.grad_norm >= 0) {
    line["grad_norm"] = now.grad_norm;
    line["clipped_steps"] = now.clipped_steps - last_.clipped_steps;
  }
  metrics_.Write("step", line);
  last_time_ = t;
  last_ = now;
  last_step_ = step;
}

void TrainReport::EpochLine(int64_t step, int epoch, double samples_per_s, const char* metric_name,
                            double test_metric, double validation_metric) {
  nlohmann::ordered_json line;
  line["step"] = step;
  line["epoch"] = epoch;
  line["samples_per_s"] = samples_per_s;
  line["test_metric_name"] = metric_name != nullptr ? nlohmann::ordered_json(metric_name) : nullptr;
  if (metric_name != nullptr && test_metric >= 0) {
    line["test_metric"] = test_metric;
  } else {
    line["test_metric"] = nullptr;
  }
  // Only where there is a validation set: older readers see the lines they knew.
  if (metric_name != nullptr && validation_metric >= 0)
    line["validation_metric"] = validation_metric;
  metrics_.Write("epoch", line);
}

void TrainReport::Finish() { bar_.Finish(); }

Status TrainReport::OpenSampleLog(const std::string& path) {
  sample_log_.reset(std::fopen(path.c_str(), "a"));
  if (!sample_log_)
    return Unavailable(fmt::format("PSTRAIN_TEST_SAMPLE_LOG {}: cannot open", path));
  return Status::OK();
}

void TrainReport::Trained(int64_t generation, int64_t step, int epoch,
                          const std::vector<int64_t>& sample_ids) {
  if (!sample_log_) return;
  for (int64_t id : sample_ids)
    std::fprintf(sample_log_.get(), "%lld %lld %d %lld\n", static_cast<long long>(generation),
                 static_cast<long long>(step), epoch, static_cast<long long>(id));
  std::fflush(sample_log_.get());
}

}  // namespace pstrain
