#include "roles/worker/best_epoch.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <string_view>

#include "src/common/checkpoint_file.h"
#include "src/common/config/identity.h"

namespace pstrain {
namespace {

constexpr char kBestFile[] = "BEST";

// A number that is all of `text`.
template <typename T>
bool ParseWhole(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

}  // namespace

BestEpoch::BestEpoch(const Config& config) : rule_(config.train.early_stopping) {
  const TestMetric own(config.model.loss);
  metric_ = rule_ && !rule_->metric.empty() ? rule_->metric : own.name();
  higher_is_better_ = metric_ == "accuracy" || metric_ == "auc";
  job_ = JobIdentityText(config);
  watching_ = HasValidation(config.data) &&
              (rule_ || (config.train.checkpoint && config.train.checkpoint->keep_best));
}

double BestEpoch::ValueOf(const TestMetric& m) const {
  return metric_ == "logloss" ? m.logloss() : m.value();
}

bool BestEpoch::Better(double value, double than) const {
  const double delta = rule_ ? rule_->min_delta : 0.0;
  return higher_is_better_ ? value > than + delta : value < than - delta;
}

bool BestEpoch::WouldImprove(double value) const {
  return std::isfinite(value) && (!has_best() || Better(value, best_));
}

bool BestEpoch::Record(int epoch, int64_t step, double value) {
  last_epoch_ = epoch;
  if (!WouldImprove(value)) return false;
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
  if (!sections.ok()) return sections.status();  // its message names the file
  const SectionsByName by_name = ByName(*sections);
  const auto best = by_name.find("best");
  const auto job = by_name.find("job");
  if (best == by_name.end() || job == by_name.end())
    return InvalidArgument(path + ": no 'best' or 'job' section");
  // Another job's best, or one ahead of the step resumed (a checkpoint
  // after it was lost): not this run's to count from.
  if (std::string(job->second->begin(), job->second->end()) != job_) return Status::OK();
  const std::string text(best->second->begin(), best->second->end());
  // "step N\nepoch E\n<metric> V\n": each line a key and a number.
  std::map<std::string, std::string, std::less<>> fields;
  for (std::string_view rest(text); !rest.empty() && fields.size() < 8;) {
    const size_t eol = std::min(rest.find('\n'), rest.size());
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(std::min(eol + 1, rest.size()));
    const size_t space = line.find(' ');
    if (space != std::string_view::npos)
      fields[std::string(line.substr(0, space))] = std::string(line.substr(space + 1));
  }
  if (fields.count(metric_) == 0) return Status::OK();  // another metric's best
  int64_t step = -1, epoch = 0;
  double value = 0;
  if (!ParseWhole(fields["step"], &step) || !ParseWhole(fields["epoch"], &epoch) ||
      !ParseWhole(fields[metric_], &value) || step < 0 || epoch < 1 || epoch > (int64_t{1} << 30) ||
      !std::isfinite(value))
    return InvalidArgument(fmt::format("{}: cannot read its best", path));
  if (step > resumed_step) return Status::OK();
  best_ = value;
  best_epoch_ = static_cast<int>(epoch);
  best_step_ = step;
  last_epoch_ = resumed_epoch;
  return Status::OK();
}

}  // namespace pstrain
