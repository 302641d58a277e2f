// The losses a model trains on, averaged over the batch.
//   softmax_cross_entropy: logits [N, C], labels class indices 0..C-1;
//     per sample logsumexp(x) - x[label].
//   bce_with_logits: logits [N, 1], labels 0 or 1; per sample the stable
//     form max(x, 0) - x * y + log(1 + exp(-|x|)).
//   mse: outputs [N, 1], labels any finite number; per sample (x - y)^2.
#pragma once

#include <vector>

#include "src/common/config/model_config.h"
#include "src/common/status.h"
#include "src/common/tensor.h"

namespace pstrain {

// Whether every label fits a head of `classes` outputs: softmax_cross_entropy
// takes whole numbers 0..classes-1, bce_with_logits numbers in [0, 1], mse
// any finite number. The error names the first label that does not and its
// sample (row).
Status CheckLabels(LossType type, int64_t classes, const std::vector<float>& labels);

// The mean loss of `logits` against `labels` (one per row). When `grad` is
// not null it receives d(mean loss)/d(logits), shaped like logits. Labels
// are checked first (CheckLabels): data that does not fit the model is an
// error, never a read out of bounds, whatever the build.
StatusOr<float> MeanLoss(LossType type, const Tensor& logits, const std::vector<float>& labels,
                         Tensor* grad);

}  // namespace pstrain
