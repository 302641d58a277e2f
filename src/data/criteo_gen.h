// A generator of synthetic click logs in the Criteo TSV layout (see
// criteo_reader.h), with labels drawn from a planted logistic model, so the
// best AUC any model can reach on them is known:
//
//   logit = bias + sum_f w_f[category of field f] + sum_j v_j * log(1 + I_j)
//   label ~ Bernoulli(sigmoid(logit))
//
// Categories follow a Zipf law per field (rank k drawn with probability
// proportional to (k+1)^-zipf); each field has its own number of categories,
// its own weight scale and share of empty values (an empty value has its own
// weight). Integer features are exponential counts, some empty (the reader
// maps empty to 0, and so does the model).
//
// Deterministic: the same options give the same files (random.h draws the
// numbers; only libm's last-bit rounding of log/exp could differ between
// platforms). The files and their sharding: gen_files.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "src/data/gen_files.h"

namespace pstrain {

struct GenOptions : GenShape {
  double zipf = 1.1;
  int64_t min_categories = 10000;  // per field, spread geometrically
  int64_t max_categories = 100000;
  double weight_std = 0.5;         // typical std of a field's frequent values' weights
  double dense_weight_std = 0.15;  // std of the v_j
  double click_rate = 0.25;        // about this share of labels is 1
};

// Writes the files, first removing train.txt-NNNNN and test.txt files of an
// earlier run in out_dir (the sharding rule would pick up extra shards).
StatusOr<GenReport> GenerateCriteo(const GenOptions& options);

}  // namespace pstrain
