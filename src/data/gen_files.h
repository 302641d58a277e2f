// Writing a synthetic data set with a planted model (`pstrain gen`): the
// training rows split over shard files DIR/train.txt-00000, ..., a test file
// DIR/test.txt, and the planted model's AUC on the test rows. Each format's
// generator (criteo_gen.h, libsvm_gen.h) draws and formats one row; row i of
// either set depends only on (seed, i), so the rows do not change with the
// number of shards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "src/common/random.h"
#include "src/common/status.h"

namespace pstrain {

// Streams of the seed: the generators' own (their model, a pilot sample)
// come before the rows'.
enum GenStream : uint64_t { kModelStream = 0, kPilotStream, kTrainStream, kTestStream };

struct GenShape {
  int64_t rows = 1000000;  // training rows, split over the shards
  int shards = 1;          // out_dir/train.txt-00000 ... -<shards-1>
  int64_t test_rows = -1;  // out_dir/test.txt; -1: rows / 10; 0: no test file
  std::string out_dir;
  uint64_t seed = 1;
};

struct GenReport {
  int64_t train_rows = 0;
  int64_t test_rows = 0;
  std::vector<std::string> files;  // written, training shards first
  // AUC of the planted model's probabilities against the drawn labels on the
  // test rows (the training rows when there are none): a ceiling for any
  // model trained on this data.
  double planted_auc = 0;
  double positive_rate = 0;  // share of labels that are 1, same rows
};

// Draws one row from `rng` and writes its line, "\n" included, at `p`
// (room for max_row_bytes); returns the end of the line, and the planted
// probability of a click and the drawn label.
using RowWriter = std::function<char*(Rng* rng, char* p, double* prob, bool* label)>;

// Checks `shape`, then writes the files, first removing train.txt-NNNNN and
// test.txt files of an earlier run in out_dir (the sharding rule would pick
// up extra shards).
StatusOr<GenReport> WriteDataSet(const GenShape& shape, size_t max_row_bytes,
                                 const RowWriter& write_row);

// The bias that makes the mean of sigmoid(bias + logit) over `logits` equal
// to `rate` (bisection: the mean is increasing in the bias).
double BiasFor(const std::vector<double>& logits, double rate);

}  // namespace pstrain
