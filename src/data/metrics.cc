#include "src/data/metrics.h"

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

}  // namespace pstrain
