// A generator of synthetic sparse click data in libsvm format, the classic
// parameter-server workload (sparse logistic regression), with labels drawn
// from a planted logistic model:
//
//   logit = bias + sum over the row's pairs id:value of w[id] * value
//   label ~ Bernoulli(sigmoid(logit)), written +1 or -1
//
// A line is `label 0:1 id:value id:value ...`, ids ascending: id 0 is a
// constant feature (every row has it, so a model without a bias of its own
// learns the bias as its weight), ids 1..features are drawn by a Zipf law
// (the rank-k id with probability proportional to (k+1)^-zipf), between
// min_active and max_active draws a row (a repeated id is kept once). Half the values are 1,
// the others a number in [0.1, 2] with three decimals. A frequent id's
// weight is larger than a rare one's, as in criteo_gen.h.
#pragma once

#include <cstdint>

#include "src/common/status.h"
#include "src/data/gen_files.h"

namespace pstrain {

struct LibsvmGenOptions : GenShape {
  int64_t features = 100000;  // ids 1..features
  int min_active = 5;         // distinct ids a row, besides id 0
  int max_active = 40;
  double zipf = 1.05;
  double weight_std = 0.6;
  double click_rate = 0.25;
};

StatusOr<GenReport> GenerateLibsvm(const LibsvmGenOptions& options);

}  // namespace pstrain
