#include "src/nn/loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pstrain {
namespace {

// Softmax cross-entropy of one row; grad (if any) gets (softmax - onehot) * scale.
double SoftmaxRow(const float* x, int64_t classes, int64_t label, float scale, float* grad) {
  const float top = *std::max_element(x, x + classes);
  double sum = 0.0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(x[c] - top));
  const double log_sum = std::log(sum);
  if (grad != nullptr) {
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(static_cast<double>(x[c] - top) - log_sum);
      grad[c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) * scale);
    }
  }
  return log_sum + top - x[label];
}

double BceRow(float x, float y, float scale, float* grad) {
  if (grad != nullptr) {
    // sigmoid(x) without overflow for either sign.
    const double e = std::exp(-std::fabs(static_cast<double>(x)));
    const double sigmoid = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    *grad = static_cast<float>((sigmoid - y) * scale);
  }
  return std::max(x, 0.0f) - static_cast<double>(x) * y +
         std::log1p(std::exp(-std::fabs(static_cast<double>(x))));
}

}  // namespace

Status CheckLabels(LossType type, int64_t classes, const std::vector<float>& labels) {
  for (size_t i = 0; i < labels.size(); ++i) {
    const float y = labels[i];
    if (type == LossType::kMse) {
      if (std::isfinite(y)) continue;
      return InvalidArgument(fmt::format("label {} of sample {}: mse needs finite labels", y, i));
    }
    if (type == LossType::kBceWithLogits) {
      if (y >= 0.0f && y <= 1.0f) continue;
      return InvalidArgument(
          fmt::format("label {} of sample {}: bce_with_logits needs labels in [0, 1]", y, i));
    }
    if (y >= 0.0f && y < static_cast<float>(classes) && y == std::floor(y)) continue;
    return InvalidArgument(fmt::format(
        "label {} of sample {}: the model has {} outputs, so softmax_cross_entropy needs labels "
        "0..{}",
        y, i, classes, classes - 1));
  }
  return Status::OK();
}

StatusOr<float> MeanLoss(LossType type, const Tensor& logits, const std::vector<float>& labels,
                         Tensor* grad) {
  const int64_t n = logits.shape.empty() ? 0 : logits.dim(0);
  if (n <= 0 || n != static_cast<int64_t>(labels.size()))
    return InvalidArgument(
        fmt::format("{} rows of logits for {} labels", n, static_cast<int64_t>(labels.size())));
  const int64_t classes = logits.size() / n;
  if (type != LossType::kSoftmaxCrossEntropy && classes != 1)
    return InvalidArgument(
        fmt::format("{} needs one output a row, got {}", LossTypeName(type), classes));
  PSTRAIN_RETURN_IF_ERROR(CheckLabels(type, classes, labels));
  if (grad != nullptr) grad->Resize(logits.shape);
  const float scale = 1.0f / static_cast<float>(n);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    float* g = grad != nullptr ? grad->ptr() + i * classes : nullptr;
    if (type == LossType::kSoftmaxCrossEntropy) {
      const auto label = static_cast<int64_t>(labels[i]);
      total += SoftmaxRow(logits.ptr() + i * classes, classes, label, scale, g);
    } else if (type == LossType::kMse) {
      const double error = static_cast<double>(logits.data[i]) - labels[i];
      if (g != nullptr) *g = static_cast<float>(2.0 * error * scale);
      total += error * error;
    } else {
      total += BceRow(logits.data[i], labels[i], scale, g);
    }
  }
  return static_cast<float>(total / static_cast<double>(n));
}

}  // namespace pstrain
