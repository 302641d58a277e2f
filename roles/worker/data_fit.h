// DataFit: whether the samples a job reads fit the model it trains, so that
// a mismatch is one line before the first step instead of a NaN loss, a
// useless model or a read out of bounds:
//   - the features' shape against model.input,
//   - the categorical fields a sample against model.sparse_fields,
//   - every id against the rows of each embedding table that reads it (`vocab`),
//   - every label against the head (the loss's rule, src/nn/loss.h).
// Checked on the first batch of every data file before a job starts
// (`pstrain check`, a worker's and `pstrain local`'s start) and on every
// sample a worker loads. An error names the config key and the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/config/config.h"
#include "src/common/logging.h"
#include "src/common/status.h"
#include "src/common/tensor.h"
#include "src/data/dataset.h"

namespace pstrain {

// What the model reads of a sample, with the config keys that say so.
struct ModelReads {
  LossType loss = LossType::kSoftmaxCrossEntropy;
  Shape input;            // model.input; empty: no dense features are read
  int sparse_fields = 0;  // model.sparse_fields; 0: no ids are read
  // Per id slot: the rows of the smallest embedding table that reads it
  // (0: none does), and the key that sets them ("model.deep[0].vocab").
  std::vector<int64_t> slot_vocab;
  std::vector<std::string> slot_vocab_key;
  bool tables_by_column = false;  // data.columns name their tables (table:)
  int64_t classes = 1;            // the head's outputs
  std::string head_key;           // what sets them: "model.layers[9].out", or "model.loss"
};

// `output`: one sample's logits as the built model gives them
// (Model::output_shape).
ModelReads ModelReadsOf(const ModelConfig& config, const Shape& output);

// Every sample of `data` against `reads`; `features` and `labels` name the
// files they came from.
Status CheckFit(const ModelReads& reads, const Dataset& data, const std::string& features,
                const std::string& labels);

// The first `batch` samples of every file `config` names (training shards
// and test files), each against `reads`.
Status CheckFirstBatches(const DataConfig& config, const ModelReads& reads, int64_t batch);

// The file names CheckFit gives for samples loaded from `paths` (one
// data.train or data.test list of `format`).
struct DataFiles {
  std::string features, labels;
};
DataFiles DataFilesOf(DataFormat format, const std::vector<std::string>& paths, const char* key);

// The line that tells of the lines data.on_bad_row: skip left out of
// `data` (data.`key`); "" when none.
std::string SkippedLines(const Dataset& data, const std::string& key);

// What a worker does with a set it loaded (`which`: "train", "test",
// "validation"): logs the lines data.on_bad_row: skip left out, then
// CheckFit on every sample.
Status CheckLoaded(const ModelReads& reads, const DataConfig& config, const Dataset& data,
                   const char* which, const Logger& log);

}  // namespace pstrain
