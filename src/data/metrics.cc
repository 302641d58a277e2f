#include "src/data/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace pstrain {
namespace {

int64_t CountCorrect(const Tensor& logits, const std::vector<float>& labels) {
  assert(logits.shape.size() == 2 && logits.dim(0) == static_cast<int64_t>(labels.size()));
  const int64_t n = logits.dim(0), c = logits.dim(1);
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits.ptr() + i * c;
    const int64_t best = std::max_element(row, row + c) - row;
    if (best == static_cast<int64_t>(labels[static_cast<size_t>(i)])) ++correct;
  }
  return correct;
}

}  // namespace

double Accuracy(const Tensor& logits, const std::vector<float>& labels) {
  if (labels.empty()) return 0.0;
  return static_cast<double>(CountCorrect(logits, labels)) / static_cast<double>(labels.size());
}

double Auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  assert(scores.size() == labels.size());
  const size_t n = scores.size();
  // A diverged model's NaN would break the sort's ordering: rank it lowest.
  std::vector<float> key(scores);
  for (float& s : key) {
    if (std::isnan(s)) s = -std::numeric_limits<float>::infinity();
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
  // Mann-Whitney U: the sum of the positives' ranks (1-based, a run of tied
  // scores sharing its average rank), less the ranks they would have among
  // themselves alone.
  double positive_rank_sum = 0;
  int64_t positives = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && key[order[j]] == key[order[i]]) ++j;
    const double rank = 0.5 * static_cast<double>(i + 1 + j);  // average of i+1 .. j
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] > 0.5f) {
        positive_rank_sum += rank;
        ++positives;
      }
    }
    i = j;
  }
  const int64_t negatives = static_cast<int64_t>(n) - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

double LogLoss(const std::vector<float>& probabilities, const std::vector<float>& labels) {
  assert(probabilities.size() == labels.size());
  if (labels.empty()) return 0.0;
  double sum = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double p = std::clamp<double>(probabilities[i], kLogLossEps, 1 - kLogLossEps);
    sum -= labels[i] > 0.5f ? std::log(p) : std::log(1 - p);
  }
  return sum / static_cast<double>(labels.size());
}

void AccuracyAccumulator::Add(const Tensor& logits, const std::vector<float>& labels) {
  correct_ += CountCorrect(logits, labels);
  count_ += static_cast<int64_t>(labels.size());
}

void BinaryAccumulator::Add(const std::vector<float>& probabilities,
                            const std::vector<float>& labels) {
  assert(probabilities.size() == labels.size());
  scores_.insert(scores_.end(), probabilities.begin(), probabilities.end());
  labels_.insert(labels_.end(), labels.begin(), labels.end());
}

double BinaryAccumulator::Auc() const { return pstrain::Auc(scores_, labels_); }
double BinaryAccumulator::LogLoss() const { return pstrain::LogLoss(scores_, labels_); }

void TestMetric::Add(const Tensor& logits, const std::vector<float>& labels) {
  const auto n = static_cast<int64_t>(labels.size());
  if (n == 0) return;
  samples_ += n;
  const int64_t width = logits.size() / n;
  switch (loss_) {
    case LossType::kSoftmaxCrossEntropy:
      classes_ = width;
      for (int64_t i = 0; i < n; ++i) {
        const float* row = logits.ptr() + i * width;
        const auto label = static_cast<int64_t>(labels[static_cast<size_t>(i)]);
        // A NaN score (a model that diverged) is never right: the label's
        // counts as wrong, and any other's as below every number.
        if (label < 0 || label >= width || std::isnan(row[label])) continue;
        // The label's rank: how many classes score above it (ties to the
        // lower index, as the arg-max takes the first).
        int64_t above = 0;
        for (int64_t c = 0; c < width; ++c)
          above += row[c] > row[label] || (row[c] == row[label] && c < label);
        correct_ += above == 0;
        top_k_correct_ += above < kTopK;
      }
      return;
    case LossType::kBceWithLogits: {
      std::vector<float> probabilities(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        probabilities[static_cast<size_t>(i)] = 1.0f / (1.0f + std::exp(-logits.data[i]));
      binary_.Add(probabilities, labels);
      return;
    }
    case LossType::kMse:
      for (int64_t i = 0; i < n; ++i) {
        const double error = static_cast<double>(logits.data[i]) - labels[static_cast<size_t>(i)];
        squared_error_ += error * error;
      }
      return;
  }
}

double TestMetric::value() const {
  if (samples_ == 0) return 0.0;
  switch (loss_) {
    case LossType::kSoftmaxCrossEntropy:
      return static_cast<double>(correct_) / static_cast<double>(samples_);
    case LossType::kBceWithLogits:
      return binary_.Auc();
    case LossType::kMse:
      return std::sqrt(squared_error_ / static_cast<double>(samples_));
  }
  return 0.0;
}

const char* TestMetric::name() const {
  switch (loss_) {
    case LossType::kSoftmaxCrossEntropy:
      return "accuracy";
    case LossType::kBceWithLogits:
      return "auc";
    case LossType::kMse:
      return "rmse";
  }
  return "unknown";
}

double TestMetric::logloss() const {
  return loss_ == LossType::kBceWithLogits ? binary_.LogLoss() : -1.0;
}

std::string TestMetric::Describe(std::string_view set) const {
  switch (loss_) {
    case LossType::kSoftmaxCrossEntropy:
      if (classes_ > kTopK)
        return fmt::format("{} accuracy: {:.4f}, top-{}: {:.4f} ({} samples)", set, value(), kTopK,
                           samples_ == 0 ? 0.0 : static_cast<double>(top_k_correct_) / samples_,
                           samples_);
      return fmt::format("{} accuracy: {:.4f} ({} samples)", set, value(), samples_);
    case LossType::kBceWithLogits:
      return fmt::format("{} AUC: {:.4f}, log-loss: {:.4f} ({} samples)", set, value(), logloss(),
                         samples_);
    case LossType::kMse:
      return fmt::format("{} RMSE: {:.4f} ({} samples)", set, value(), samples_);
  }
  return "";
}

}  // namespace pstrain
