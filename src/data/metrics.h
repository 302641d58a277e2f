// Evaluation metrics over model outputs and labels. Plain functions plus
// accumulators for streaming over test batches; not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "src/common/config/model_config.h"
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

// What a test pass reports of a model trained with `loss`, over its batches
// of outputs (logits) and labels:
//   softmax_cross_entropy: accuracy, and top-5 accuracy with more than 5
//     classes;
//   bce_with_logits: AUC, with the log-loss of sigmoid(logit);
//   mse: RMSE, the root of the mean squared error.
class TestMetric {
 public:
  explicit TestMetric(LossType loss) : loss_(loss) {}
  void Add(const Tensor& logits, const std::vector<float>& labels);
  // The headline number and its name in the metrics file: "accuracy",
  // "auc" or "rmse".
  double value() const;
  const char* name() const;
  // Whether a larger value is a better model (not for RMSE).
  bool higher_is_better() const { return loss_ != LossType::kMse; }
  double logloss() const;  // bce_with_logits; -1 else
  int64_t samples() const { return samples_; }
  // "test accuracy: 0.9066, top-5: 0.9981 (10000 samples)", "test AUC:
  // 0.7712, log-loss: 0.4811 (2000 samples)", "test RMSE: 0.2311 (500
  // samples)"; `set` names the samples ("validation accuracy: ...").
  std::string Describe(std::string_view set = "test") const;

 private:
  static constexpr int64_t kTopK = 5;
  const LossType loss_;
  int64_t samples_ = 0;
  int64_t classes_ = 0;
  int64_t correct_ = 0, top_k_correct_ = 0;
  double squared_error_ = 0;
  BinaryAccumulator binary_;
};

}  // namespace pstrain
