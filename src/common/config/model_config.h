// The `model:` and `data:` parts of the job's YAML config as plain structs,
// filled by config.cc and used by src/nn (building the network) and src/data
// (reading samples).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pstrain {

// The words the config chooses from, parsed once by config_model.cc.
enum class LayerType {
  kLinear,
  kConv2d,
  kMaxpool,
  kAvgpool,
  kRelu,
  kSigmoid,
  kTanh,
  kDropout,
  kFlatten,
  kConcat,
  kEmbeddingBag,
  kGelu,
  kLayerNorm,
  kResidual,
  kAugment,
  kBatchNorm,
};
enum class LossType { kSoftmaxCrossEntropy, kBceWithLogits, kMse };
enum class Device { kCpu, kGpu };
enum class DataFormat { kIdx, kCriteo, kCsv, kLibsvm };

// How the config spells each value ("embedding_bag", "bce_with_logits"), for
// messages and logs; "unknown" for a value outside the enum.
const char* LayerTypeName(LayerType type);
const char* LossTypeName(LossType loss);
const char* DeviceName(Device device);
const char* DataFormatName(DataFormat format);

// One layer of a model. Which fields matter depends on `type`.
struct LayerConfig {
  LayerType type = LayerType::kLinear;
  // Parameters are "<name>.weight" and "<name>.bias". Default: "<type><i>"
  // with i the layer's index in its list (e.g. "linear3").
  std::string name;
  int64_t out = 0;           // linear: output features
  int64_t out_channels = 0;  // conv2d
  int kernel = 0;            // conv2d, maxpool, avgpool (square)
  int stride = 0;            // 0: conv2d 1, pooling = kernel
  int padding = 0;           // conv2d, pooling
  bool bias = true;          // linear, conv2d
  float rate = 0.5f;         // dropout: probability of zeroing
  int64_t vocab = 0;         // embedding_bag: rows
  int64_t dim = 0;           // embedding_bag: columns
  std::string mode = "sum";  // embedding_bag: sum | mean over the sample's fields,
                             // or concat (one dim-sized slot per field)
  // embedding_bag: the id slots it reads, in order, when data.columns name
  // their tables (a column's `table:`; filled by the config reader); empty:
  // every slot of the sample.
  std::vector<int> slots;
  // xavier | he | normal | uniform | zeros (weights; biases start at 0).
  // Default: he for conv2d and linear, normal (std 0.01) for embedding_bag.
  std::string init;
  float init_scale = 0.01f;  // std of normal, bound of uniform
  float eps = 1e-5f;         // layer_norm, batch_norm: added to the variance
  float momentum = 0.1f;     // batch_norm: weight of a batch in the running statistics
  // batch_norm: the running statistics averaged among the workers every
  // step (in the all-reduce), not only at checkpoints and epoch ends.
  bool sync_stats = false;
  // residual: the body, whose output is added to the block's input, and at
  // most one layer that the input goes through first (a projection) when
  // the body changes its shape. Their layers are named "<block>.<name>".
  std::vector<LayerConfig> layers;
  std::vector<LayerConfig> projection;
  // augment (images [C, H, W], training only): a mirror image with
  // probability 1/2 ("horizontal"), and a random crop of the image padded
  // with crop_pad zeros on each side (0: none).
  std::string flip = "none";
  int crop_pad = 0;
  int line = 0;  // where it was written, for messages
};

// The name of a layer the config leaves unnamed: "<type><index>", prefixed
// with its tower ("deep_linear1") so that the towers' names differ.
std::string DefaultLayerName(const std::string& tower, LayerType type, size_t index);
// The name of layer `index` of a residual block's body within the block:
// its own, or "<type><index>". The projection is "projection".
std::string SubLayerName(const LayerConfig& layer, size_t index);
// How deep residual blocks may nest in one another, and how many layers a
// model holds in all (blocks' included): YAML aliases could otherwise make
// a small file name a huge model.
inline constexpr int kMaxBlockDepth = 8;
inline constexpr int64_t kMaxModelLayers = 10000;
// The most zeros augment's crop pads an image with on each side.
inline constexpr int kMaxCropPad = 64;

struct ModelConfig {
  std::vector<int64_t> input;  // one sample's dense input, e.g. [1, 28, 28] or [13]
  int sparse_fields = 0;       // categorical ids per sample (click data), 0: none
  // A sequential model ...
  std::vector<LayerConfig> layers;
  // ... or two towers whose outputs are summed into one logit (Wide&Deep):
  // `wide` usually an embedding_bag of dim 1 over the ids, `deep` embeddings
  // plus the dense features into an MLP.
  std::vector<LayerConfig> wide;
  std::vector<LayerConfig> deep;
  LossType loss = LossType::kSoftmaxCrossEntropy;
  Device device = Device::kCpu;
  int line = 0;
  int input_line = 0;  // of `input`, for messages about it
};

// One column of a csv or libsvm line (data.columns; docs/formats.md, "Data
// by schema"). Which fields matter depends on `type`.
enum class ColumnType { kLabel, kDense, kCategorical, kMultiHot, kSkip };
enum class DenseTransform { kNone, kLog1p, kStandardize };

struct ColumnConfig {
  std::string name;
  ColumnType type = ColumnType::kSkip;
  // label: a number, or with `threshold` set, 1 when above it and 0 else
  // (libsvm's -1/+1 for a bce model).
  bool has_threshold = false;
  float threshold = 0;
  // dense: an empty cell counts as `fill`, then the transform (log1p is
  // log(1 + max(x, 0)); standardize (x - mean) / std).
  float fill = 0;
  DenseTransform transform = DenseTransform::kNone;
  float mean = 0;
  float std = 1;
  // categorical and multi_hot: each value hashed with the column's field
  // index into [0, vocab), or with raw_ids read as the id itself.
  bool raw_ids = false;
  // categorical and multi_hot: the embedding_bag layers that read this
  // column's ids (empty: every one, when no column names one). Its ids then
  // hash into those tables' vocab, which `vocab` holds (the config reader
  // fills it; 0: data.vocab).
  std::vector<std::string> tables;
  int64_t vocab = 0;
  // multi_hot: up to max_ids values split at `separator` (libsvm: the
  // line's id:value pairs); a sample has max_ids slots, unused ones weigh 0.
  std::string separator = "|";
  int max_ids = 0;
  int line = 0;
};

// The id slots column `c` gives a sample: one for a categorical column,
// max_ids for a multi_hot one, none for the others.
inline int IdSlots(const ColumnConfig& c) {
  return c.type == ColumnType::kCategorical ? 1 : c.type == ColumnType::kMultiHot ? c.max_ids : 0;
}

// The id slots embedding_bag `c` reads of a sample's `sparse_fields`.
inline int SlotsRead(const LayerConfig& c, int sparse_fields) {
  return c.slots.empty() ? sparse_fields : static_cast<int>(c.slots.size());
}

enum class OnBadRow { kFail, kSkip };

struct DataConfig;
// Whether the job measures a validation set: data.validation's files or a
// held-out fraction of the training set.
bool HasValidation(const DataConfig& data);
// The files the validation set comes from: data.validation's, or with a
// held-out share, data.train's.
const std::vector<std::string>& ValidationFiles(const DataConfig& data);

struct DataConfig {
  DataFormat format = DataFormat::kIdx;
  // idx: [images, labels] (.gz or raw). criteo: one or more paths; a path
  // "DIR/train.txt" with files "DIR/train.txt-00000", "-00001", ... means
  // those shards, worker r reading the shards whose suffix % workers == r;
  // a single file is split among workers by sample index.
  std::vector<std::string> train;
  std::vector<std::string> test;
  // Samples to measure the model on at each epoch's end, apart from the
  // test set, for train.early_stopping and checkpoint.keep_best (the same
  // form as test); empty: none.
  std::vector<std::string> validation;
  // Or a share of the training samples held out as the validation set
  // (0: none): each sample of each training file, by its file's name and
  // its place in it, hashed with validation_seed (train.seed).
  float validation_fraction = 0;
  uint64_t validation_seed = 0;
  int64_t vocab = 1 << 20;  // criteo/csv/libsvm: categorical values hash into [0, vocab)
  // csv and libsvm: what each column of a line is (criteo's are fixed).
  std::vector<ColumnConfig> columns;
  std::string delimiter = ",";  // csv: one byte between columns
  bool header = false;          // csv: each file's first line names columns (skipped)
  // A line that does not parse: stop with an error naming it, or skip it
  // (counted, the first few named in the log).
  OnBadRow on_bad_row = OnBadRow::kFail;
  int64_t limit = 0;    // use at most this many training samples (0: all)
  bool shuffle = true;  // reshuffle every epoch (seeded by train.seed)
  int line = 0;
};

}  // namespace pstrain
