// Evaluation metrics over model outputs and labels. Plain functions plus
// accumulators for streaming over test batches; not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "src/common/tensor.h"

namespace pstrain {

// Probabilities are clipped to [kLogLossEps, 1 - kLogLossEps] so one
// confident mistake gives a large but finite loss.
inline constexpr double kLogLossEps = 1e-7;

// Fraction of rows of `logits` ([N, C]) whose arg-max equals the label
// (a class index stored as float). 0 for N = 0.
double Accuracy(const Tensor& logits, const std::vector<float>& labels);

// Area under the ROC curve of `scores` against 0/1 `labels`: the probability
// that a random positive scores above a random negative, ties counting one
// half (rank-based, O(n log n)). 0.5 when either class is absent.
double Auc(const std::vector<float>& scores, const std::vector<float>& labels);

// Mean binary cross-entropy of probabilities against 0/1 labels, clipped.
double LogLoss(const std::vector<float>& probabilities, const std::vector<float>& labels);

// Accuracy over several batches of logits.
class AccuracyAccumulator {
 public:
  void Add(const Tensor& logits, const std::vector<float>& labels);
  double Value() const { return count_ == 0 ? 0.0 : static_cast<double>(correct_) / count_; }
  int64_t count() const { return count_; }

 private:
  int64_t correct_ = 0;
  int64_t count_ = 0;
};

// AUC and log loss over several batches of probabilities; keeps every score
// (AUC needs the global ranking).
class BinaryAccumulator {
 public:
  void Add(const std::vector<float>& probabilities, const std::vector<float>& labels);
  double Auc() const;
  double LogLoss() const;
  int64_t count() const { return static_cast<int64_t>(labels_.size()); }

 private:
  std::vector<float> scores_;
  std::vector<float> labels_;
};

}  // namespace pstrain
