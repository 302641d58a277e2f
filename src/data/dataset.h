// Dataset: samples held in memory, and loading the ones a worker trains on as
// DataConfig describes (format, file lists, shards, limit).
//
// Sharding (docs/configuration.md, "Training", the paragraph on data): a text (criteo,
// csv, libsvm) path P that has
// files P-00000, P-00001, ... names those shards, and worker r loads the shards whose suffix %
// workers == r (PaddlePaddle's rule); the result is `sharded_by_file` and the Batcher must not
// split it again. Anything else (idx files, a single text file) is loaded whole by every worker
// and split by sample index in the Batcher, so the workers together see each sample once per epoch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/config/model_config.h"
#include "src/common/status.h"
#include "src/common/tensor.h"

namespace pstrain {

// Plain data; N samples stored row-major.
struct Dataset {
  Shape sample_shape;           // one sample's dense features: [1, 28, 28], [13], [0]
  std::vector<float> dense;     // N * NumElements(sample_shape)
  int fields = 0;               // categorical ids per sample (0: none)
  std::vector<int64_t> sparse;  // N * fields
  // N * fields: each id's weight (a libsvm value; 0 for a multi_hot
  // column's unused slots); empty when every id weighs 1.
  std::vector<float> weights;
  std::vector<float> labels;  // N
  // True when this worker loaded only its own files: batch it whole.
  bool sharded_by_file = false;
  // Lines skipped as bad (data.on_bad_row: skip), and the errors of the
  // first few, each naming its file and line.
  int64_t skipped_rows = 0;
  std::vector<std::string> skipped_examples;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t dense_per_sample() const { return NumElements(sample_shape); }
};

// A shard file of a text path: its name and numeric suffix.
struct ShardFile {
  std::string path;
  int64_t index = 0;
};

// The files "P-<digits>" next to P, by increasing suffix; empty when none.
StatusOr<std::vector<ShardFile>> ListShards(const std::string& path);

// Whether the training set is split among the workers by file (text
// paths with shard files; see the top of this file): a worker's samples
// then depend on its rank and the worker count. Unreadable paths count as
// not split (loading names them).
bool SplitsTrainByFile(const DataConfig& config);

// The shards of `all` that worker `rank` of `workers` reads (suffix % workers
// == rank), keeping their order.
std::vector<ShardFile> ShardsOf(const std::vector<ShardFile>& all, int rank, int workers);

// The training samples of worker `rank` (0 <= rank < workers), at most
// config.limit of them when it is set (counted before the held-out ones,
// data.validation_fraction, are left out).
StatusOr<Dataset> LoadTrainShard(const DataConfig& config, int rank, int workers);

// All samples of `paths` (config.test or config.validation, `which` in
// messages), never sharded: evaluation reads them whole.
StatusOr<Dataset> LoadWhole(const DataConfig& config, const std::vector<std::string>& paths,
                            const char* which);

// The validation set: data.validation's files whole, or the samples
// data.validation_fraction holds out of every training file, read whole
// (LoadTrainShard leaves them out).
StatusOr<Dataset> LoadValidation(const DataConfig& config);

// The first samples of one data file (an idx pair counts as one), to check
// against the model before training.
struct FileSamples {
  std::string features;  // the file the samples' features come from
  std::string labels;    // the file of their labels (text formats: the same one)
  Dataset samples;
};

// The first `n` samples of every file `config` names: the training files
// (every shard, whichever worker reads it), then the test files.
StatusOr<std::vector<FileSamples>> ReadFirstSamples(const DataConfig& config, int64_t n);

// Every file `config` names is there (training shards and test files), as
// far as can be told without reading them: a job checks this before it
// starts, so that a missing test file is not found at the first evaluation,
// an epoch into training.
Status CheckDataFiles(const DataConfig& config);

}  // namespace pstrain
