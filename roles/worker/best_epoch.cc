#include "roles/worker/best_epoch.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "src/common/checkpoint_file.h"
#include "src/common/config/identity.h"

namespace pstrain {
namespace {

constexpr char kBestFile[] = "BEST";

}  // namespace

BestEpoch::BestEpoch(const Config& config) : rule_(config.train.early_stopping) {
  const TestMetric own(config.model.loss);
  metric_ = rule_ && !rule_->metric.empty() ? rule_->metric : own.name();
  higher_is_better_ = metric_ == "accuracy" || metric_ == "auc";
  job_ = JobIdentityText(config);
}

double BestEpoch::ValueOf(const TestMetric& m) const {
  return metric_ == "logloss" ? m.logloss() : m.value();
}

bool BestEpoch::Better(double value, double than) const {
  const double delta = rule_ ? rule_->min_delta : 0.0;
  return higher_is_better_ ? value > than + delta : value < than - delta;
}

bool BestEpoch::Record(int epoch, int64_t step, double value) {
  last_epoch_ = epoch;
  if (has_best() && !Better(value, best_)) return false;
  best_ = value;
  best_epoch_ = epoch;
  best_step_ = step;
  return true;
}

bool BestEpoch::ShouldStop() const {
  return rule_ && has_best() && last_epoch_ - best_epoch_ >= rule_->patience;
}

std::string BestEpoch::WhyStop() const {
  const int waited = last_epoch_ - best_epoch_;
  return fmt::format(
      "validation {} has not improved on {:.4f} (epoch {}, step {}) by more than {:g} for {} "
      "epoch{}",
      metric_, best_, best_epoch_, best_step_, rule_ ? rule_->min_delta : 0.0, waited,
      waited == 1 ? "" : "s");
}

Status BestEpoch::Save(const std::string& dir) const {
  if (!has_best()) return Status::OK();
  const std::string text =
      fmt::format("step {}\nepoch {}\n{} {:.17g}\n", best_step_, best_epoch_, metric_, best_);
  return WriteCheckpointFile(dir + "/" + kBestFile, {{"best", text.data(), text.size()},
                                                     {"job", job_.data(), job_.size()}})
      .WithContext(fmt::format("{}/{}", dir, kBestFile));
}

Status BestEpoch::Restore(const std::string& dir, int64_t resumed_step, int resumed_epoch) {
  const std::string path = dir + "/" + kBestFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::OK();
  auto sections = ReadCheckpointFile(path);
  if (!sections.ok()) return sections.status().WithContext(path);
  const SectionsByName by_name = ByName(*sections);
  const auto best = by_name.find("best");
  const auto job = by_name.find("job");
  if (best == by_name.end() || job == by_name.end())
    return InvalidArgument(path + ": no 'best' or 'job' section");
  // Another job's best, or one ahead of the step resumed (a checkpoint
  // after it was lost): not this run's to count from.
  if (std::string(job->second->begin(), job->second->end()) != job_) return Status::OK();
  const std::string text(best->second->begin(), best->second->end());
  long long step = -1;
  int epoch = 0;
  char name[16] = {};
  double value = 0;
  if (std::sscanf(text.c_str(), "step %lld\nepoch %d\n%15s %lf", &step, &epoch, name, &value) !=
          4 ||
      step < 0 || epoch < 1 || !std::isfinite(value))
    return InvalidArgument(fmt::format("{}: cannot read '{}'", path, text.substr(0, 80)));
  if (name != metric_ || step > resumed_step) return Status::OK();
  best_ = value;
  best_epoch_ = epoch;
  best_step_ = step;
  last_epoch_ = resumed_epoch;
  return Status::OK();
}

}  // namespace pstrain
