// The losses a model trains on, averaged over the batch.
//   softmax_cross_entropy: logits [N, C], labels class indices 0..C-1;
//     per sample logsumexp(x) - x[label].
//   bce_with_logits: logits [N, 1], labels 0 or 1; per sample the stable
//     form max(x, 0) - x * y + log(1 + exp(-|x|)).
#pragma once

#include <vector>

#include "src/common/model_config.h"
#include "src/common/status.h"
#include "src/common/tensor.h"

namespace pstrain {

// The mean loss of `logits` against `labels` (one per row). When `grad` is
// not null it receives d(mean loss)/d(logits), shaped like logits. Labels
// were validated by the reader; one out of range is a bug.
float MeanLoss(LossType type, const Tensor& logits, const std::vector<float>& labels, Tensor* grad);

}  // namespace pstrain
