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
enum class DataFormat { kIdx, kCriteo };

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
  int64_t vocab = 1 << 20;  // criteo: categorical values hash into [0, vocab)
  int64_t limit = 0;        // use at most this many training samples (0: all)
  bool shuffle = true;      // reshuffle every epoch (seeded by train.seed)
  int line = 0;
};

}  // namespace pstrain
