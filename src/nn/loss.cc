#include "src/nn/loss.h"

#include <algorithm>
#include <cassert>
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

float MeanLoss(LossType type, const Tensor& logits, const std::vector<float>& labels,
               Tensor* grad) {
  const int64_t n = logits.dim(0);
  assert(n == static_cast<int64_t>(labels.size()) && n > 0);
  const int64_t classes = logits.size() / n;
  if (grad != nullptr) grad->Resize(logits.shape);
  const float scale = 1.0f / static_cast<float>(n);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    float* g = grad != nullptr ? grad->ptr() + i * classes : nullptr;
    if (type == LossType::kSoftmaxCrossEntropy) {
      const auto label = static_cast<int64_t>(labels[i]);
      assert(label >= 0 && label < classes);
      total += SoftmaxRow(logits.ptr() + i * classes, classes, label, scale, g);
    } else {
      assert(classes == 1);
      total += BceRow(logits.data[i], labels[i], scale, g);
    }
  }
  return static_cast<float>(total / static_cast<double>(n));
}

}  // namespace pstrain
