// The model: and data: sections of the YAML config: what a user gets for a
// valid file, and the exact file:line: key message for each kind of mistake.
#include <doctest/doctest.h>

#include "src/common/config/config.h"
#include "tests/config_test_util.h"

namespace pstrain {
namespace {

using testing::ErrorOf;
using testing::Parse;

const char* const kLeNet = R"(model:
  input: [1, 28, 28]
  layers:
    - {name: conv1, type: conv2d, out_channels: 6, kernel: 5, padding: 2}
    - {type: relu}
    - {type: maxpool, kernel: 2}
    - {name: conv2, type: conv2d, out_channels: 16, kernel: 5, stride: 1, bias: false,
       init: xavier}
    - {type: relu}
    - {type: avgpool, kernel: 2, stride: 2}
    - {type: flatten}
    - {name: fc1, type: linear, out: 120, init: normal, init_scale: 0.05}
    - {type: dropout, rate: 0.25}
    - {name: fc3, type: linear, out: 10}
  loss: softmax_cross_entropy
data:
  format: idx
  train: [/d/train-images-idx3-ubyte.gz, /d/train-labels-idx1-ubyte.gz]
  test: [t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz]
  limit: 1000
  shuffle: false
)";

TEST_CASE("a LeNet model with idx data parses to its layers") {
  Config c = Parse(kLeNet);
  REQUIRE(c.has_model);
  const ModelConfig& m = c.model;
  CHECK(m.line == 1);
  CHECK(m.input == std::vector<int64_t>{1, 28, 28});
  CHECK(m.sparse_fields == 0);
  CHECK(m.loss == LossType::kSoftmaxCrossEntropy);
  CHECK(m.device == Device::kCpu);
  CHECK(m.wide.empty());
  CHECK(m.deep.empty());
  REQUIRE(m.layers.size() == 10);

  const LayerConfig& conv1 = m.layers[0];
  CHECK(conv1.name == "conv1");
  CHECK(conv1.type == LayerType::kConv2d);
  CHECK(conv1.out_channels == 6);
  CHECK(conv1.kernel == 5);
  CHECK(conv1.padding == 2);
  CHECK(conv1.stride == 0);  // defaults
  CHECK(conv1.bias);
  CHECK(conv1.init.empty());
  CHECK(conv1.line == 4);
  CHECK(m.layers[1].type == LayerType::kRelu);
  CHECK(m.layers[1].name.empty());  // src/nn names it
  CHECK(m.layers[1].line == 5);
  CHECK(m.layers[2].type == LayerType::kMaxpool);
  CHECK(m.layers[2].kernel == 2);
  const LayerConfig& conv2 = m.layers[3];
  CHECK(conv2.out_channels == 16);
  CHECK(conv2.stride == 1);
  CHECK_FALSE(conv2.bias);
  CHECK(conv2.init == "xavier");
  CHECK(conv2.line == 7);
  CHECK(m.layers[4].line == 9);
  CHECK(m.layers[5].type == LayerType::kAvgpool);
  CHECK(m.layers[5].stride == 2);
  CHECK(m.layers[6].type == LayerType::kFlatten);
  CHECK(m.layers[7].out == 120);
  CHECK(m.layers[7].init == "normal");
  CHECK(m.layers[7].init_scale == doctest::Approx(0.05));
  CHECK(m.layers[8].type == LayerType::kDropout);
  CHECK(m.layers[8].rate == doctest::Approx(0.25));
  CHECK(m.layers[9].name == "fc3");
  CHECK(m.layers[9].out == 10);
  CHECK(m.layers[9].line == 14);

  REQUIRE(c.has_data);
  const DataConfig& d = c.data;
  CHECK(d.line == 16);
  CHECK(d.format == DataFormat::kIdx);
  CHECK(d.train ==
        std::vector<std::string>{"/d/train-images-idx3-ubyte.gz", "/d/train-labels-idx1-ubyte.gz"});
  CHECK(d.test ==
        std::vector<std::string>{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"});
  CHECK(d.limit == 1000);
  CHECK_FALSE(d.shuffle);
  CHECK(d.vocab == 1 << 20);  // default

  Config none = Parse("train: {}\n");
  CHECK_FALSE(none.has_model);
  CHECK_FALSE(none.has_data);
}

TEST_CASE("a layer may be written as its type alone") {
  Config c = Parse(
      "model:\n  input: [1, 28, 28]\n  layers: [flatten, {type: linear, out: 10}, sigmoid]\n");
  REQUIRE(c.model.layers.size() == 3);
  CHECK(c.model.layers[0].type == LayerType::kFlatten);
  CHECK(c.model.layers[1].out == 10);
  CHECK(c.model.layers[2].type == LayerType::kSigmoid);
  CHECK(c.model.layers[2].name.empty());

  c = Parse(
      "model:\n"
      "  input: [13]\n"
      "  layers:\n"
      "    - tanh\n"
      "    - {type: linear, out: 1}\n"
      "  loss: bce_with_logits\n"
      "  device: gpu\n");
  REQUIRE(c.model.layers.size() == 2);
  CHECK(c.model.layers[0].type == LayerType::kTanh);
  CHECK(c.model.layers[0].line == 4);
  CHECK(c.model.layers[1].line == 5);
  CHECK(c.model.loss == LossType::kBceWithLogits);
  CHECK(c.model.device == Device::kGpu);
}

TEST_CASE("a residual block holds its body and projection; gelu and layer_norm parse") {
  Config c = Parse(
      "model:\n"
      "  input: [8]\n"
      "  layers:\n"
      "    - {type: linear, out: 16}\n"
      "    - type: residual\n"
      "      name: block\n"
      "      layers: [{type: layer_norm, eps: 0.001}, gelu, {type: linear, out: 4}]\n"
      "      projection: {type: linear, out: 4, bias: false}\n"
      "    - {type: linear, out: 2}\n");
  REQUIRE(c.model.layers.size() == 3);
  const LayerConfig& block = c.model.layers[1];
  CHECK(block.type == LayerType::kResidual);
  REQUIRE(block.layers.size() == 3);
  CHECK(block.layers[0].type == LayerType::kLayerNorm);
  CHECK(block.layers[0].eps == doctest::Approx(0.001));
  CHECK(block.layers[1].type == LayerType::kGelu);
  CHECK(block.layers[2].line == 7);
  REQUIRE(block.projection.size() == 1);
  CHECK_FALSE(block.projection[0].bias);
  CHECK(block.projection[0].line == 8);

  c = Parse(
      "model:\n  input: [1, 28, 28]\n"
      "  layers: [{type: augment, flip: horizontal, crop: {pad: 4}}, flatten, "
      "{type: linear, out: 10}]\n");
  CHECK(c.model.layers[0].type == LayerType::kAugment);
  CHECK(c.model.layers[0].flip == "horizontal");
  CHECK(c.model.layers[0].crop_pad == 4);
  CHECK(ErrorOf("model: {input: [1, 4, 4], layers: [{type: augment, crop: {pad: 65}}]}\n") ==
        "x.yaml:1: model.layers[0].crop.pad: expected an integer in 1..64, got '65'");
  CHECK(ErrorOf("model: {input: [1, 4, 4], layers: [{type: augment, crop: {size: 2}}]}\n")
            .find("x.yaml:1: model.layers[0].crop.size: unknown key (allowed: pad)") == 0);
  CHECK(ErrorOf("model: {input: [1, 4, 4], layers: [{type: augment, flip: vertical}]}\n")
            .find("model.layers[0].flip: expected one of none|horizontal") != std::string::npos);
}

TEST_CASE("a residual block's mistakes name the layer inside it") {
  CHECK(ErrorOf("model: {input: [4], layers: [{type: residual}]}\n") ==
        "x.yaml:1: model.layers[0].layers: required key of a residual layer is missing");
  CHECK(ErrorOf("model: {input: [4], layers: [{type: residual, layers: []}]}\n") ==
        "x.yaml:1: model.layers[0].layers: expected a non-empty list of layers, got an empty list");
  CHECK(ErrorOf("model:\n  input: [4]\n  sparse_fields: 2\n  layers:\n"
                "    - type: residual\n"
                "      layers:\n"
                "        - {type: embedding_bag, vocab: 10, dim: 4}\n") ==
        "x.yaml:7: model.layers[0].layers[0]: embedding_bag reads the batch's own input, not the "
        "block's: not inside a residual block");
  CHECK(ErrorOf("model: {input: [4], layers: [{type: residual, layers: [relu], out: 3}]}\n") ==
        "x.yaml:1: model.layers[0].out: not a key of a residual layer");
  CHECK(ErrorOf("model: {input: [4], layers: [{type: layer_norm, eps: 0}]}\n") ==
        "x.yaml:1: model.layers[0].eps: expected a number > 0, got '0'");
  // Blocks in blocks, deeper than kMaxBlockDepth.
  std::string deep = "relu";
  for (int i = 0; i <= kMaxBlockDepth; ++i) deep = "{type: residual, layers: [" + deep + "]}";
  CHECK(ErrorOf("model: {input: [4], layers: [" + deep + "]}\n").find("nest at most 8 deep") !=
        std::string::npos);
  // Aliases that make ten blocks of ten blocks of ... out of a short file.
  std::string layers =
      "    - {type: residual, layers: &a [relu, relu, relu, relu, relu, relu, relu, "
      "relu, relu, relu]}\n";
  for (const char* level : {"a", "b", "c"}) {
    layers +=
        std::string("    - {type: residual, layers: &") + static_cast<char>(level[0] + 1) + " [";
    for (int i = 0; i < 10; ++i)
      layers += std::string(i ? ", " : "") + "{type: residual, layers: *" + level + "}";
    layers += "]}\n";
  }
  CHECK(ErrorOf("model:\n  input: [4]\n  layers:\n" + layers)
            .find("a model has at most 10000 layers, blocks' included") != std::string::npos);
}

TEST_CASE("a wide & deep model parses to its two towers") {
  Config c = Parse(
      "model:\n"
      "  input: [13]\n"
      "  sparse_fields: 26\n"
      "  loss: bce_with_logits\n"
      "  wide:\n"
      "    - {name: wide_emb, type: embedding_bag, vocab: 1000, dim: 1}\n"
      "  deep:\n"
      "    - {name: emb, type: embedding_bag, vocab: 1000, dim: 8, mode: concat, init: uniform,\n"
      "       init_scale: 0.1}\n"
      "    - concat\n"
      "    - {name: fc1, type: linear, out: 64}\n"
      "    - relu\n"
      "    - {name: fc2, type: linear, out: 1}\n"
      "data: {format: criteo, train: /d/train.txt, test: [/d/test.txt], vocab: 1000}\n");
  const ModelConfig& m = c.model;
  CHECK(m.layers.empty());
  CHECK(m.sparse_fields == 26);
  REQUIRE(m.wide.size() == 1);
  CHECK(m.wide[0].name == "wide_emb");
  CHECK(m.wide[0].vocab == 1000);
  CHECK(m.wide[0].dim == 1);
  CHECK(m.wide[0].mode == "sum");  // default
  CHECK(m.wide[0].line == 6);
  REQUIRE(m.deep.size() == 5);
  CHECK(m.deep[0].dim == 8);
  CHECK(m.deep[0].mode == "concat");
  CHECK(m.deep[0].init == "uniform");
  CHECK(m.deep[0].init_scale == doctest::Approx(0.1));
  CHECK(m.deep[1].type == LayerType::kConcat);
  CHECK(m.deep[1].line == 10);
  CHECK(m.deep[4].out == 1);
  CHECK(c.data.format == DataFormat::kCriteo);
  CHECK(c.data.train == std::vector<std::string>{"/d/train.txt"});  // one string is a list
  CHECK(c.data.test == std::vector<std::string>{"/d/test.txt"});
  CHECK(c.data.vocab == 1000);
  CHECK(c.data.shuffle);

  // Towers that only read the ids need no dense input.
  Config wide =
      Parse("model: {sparse_fields: 2, wide: [{type: embedding_bag, vocab: 9, dim: 1}]}\n");
  CHECK(wide.model.input.empty());
  CHECK(wide.model.wide.size() == 1);
}

TEST_CASE("a layer's mistakes name the layer, the key and the type") {
  CHECK(ErrorOf("model:\n  input: [4]\n  layers:\n    - {type: linear, out: 3}\n"
                "    - {type: softmax}\n") ==
        "x.yaml:5: model.layers[1].type: expected one of linear|conv2d|maxpool|avgpool|relu|"
        "sigmoid|tanh|dropout|flatten|concat|embedding_bag|gelu|layer_norm|residual|augment|batch_"
        "norm, got "
        "'softmax'");
  CHECK(ErrorOf("model:\n  input: [4]\n  layers:\n    - flatten\n    - rellu\n") ==
        "x.yaml:5: model.layers[1]: expected one of linear|conv2d|maxpool|avgpool|relu|"
        "sigmoid|tanh|dropout|flatten|concat|embedding_bag|gelu|layer_norm|residual|augment|batch_"
        "norm, got "
        "'rellu'");
  CHECK(ErrorOf("model: {input: [4], layers: [[relu]]}\n") ==
        "x.yaml:1: model.layers[0]: expected a layer (a mapping, or a type name), got a list");
  CHECK(ErrorOf("model: {input: [4], layers: [{type: relu, size: 3}]}\n") ==
        "x.yaml:1: model.layers[0].size: unknown key (allowed: type, name, out, out_channels, "
        "kernel, stride, padding, bias, rate, vocab, dim, mode, init, init_scale, eps, momentum, "
        "sync_stats, layers, flip, crop, projection)");

  // Keys the type does not take.
  CHECK(ErrorOf("model:\n  input: [1, 28, 28]\n  layers:\n"
                "    - {type: conv2d, out_channels: 6, kernel: 5}\n    - relu\n"
                "    - {type: maxpool, kernel: 2, out: 4}\n") ==
        "x.yaml:6: model.layers[2].out: not a key of a maxpool layer");
  CHECK(ErrorOf("model:\n  input: [4]\n  layers:\n    - type: linear\n      out: 2\n"
                "      rate: 0.1\n") ==
        "x.yaml:6: model.layers[0].rate: not a key of a linear layer");
  CHECK(ErrorOf("model:\n  sparse_fields: 1\n  wide:\n"
                "    - {type: embedding_bag, vocab: 5, dim: 1, bias: false}\n") ==
        "x.yaml:4: model.wide[0].bias: not a key of an embedding_bag layer");

  // Keys the type needs.
  CHECK(ErrorOf("model:\n  input: [4]\n  layers:\n    - relu\n    - {name: fc, type: linear}\n") ==
        "x.yaml:5: model.layers[1].out: required key of a linear layer is missing");
  CHECK(ErrorOf("model:\n  input: [4]\n  layers:\n    - linear\n") ==
        "x.yaml:4: model.layers[0].out: required key of a linear layer is missing");
  CHECK(ErrorOf("model:\n  input: [1, 8, 8]\n  layers:\n    - {type: conv2d, out_channels: 4}\n") ==
        "x.yaml:4: model.layers[0].kernel: required key of a conv2d layer is missing");
  CHECK(ErrorOf("model:\n  input: [1, 8, 8]\n  layers:\n    - avgpool\n") ==
        "x.yaml:4: model.layers[0].kernel: required key of an avgpool layer is missing");
  CHECK(ErrorOf("model:\n  sparse_fields: 2\n  deep:\n    - {type: embedding_bag, vocab: 9}\n") ==
        "x.yaml:4: model.deep[0].dim: required key of an embedding_bag layer is missing");

  // Ranges.
  CHECK(ErrorOf("model: {input: [4], layers: [{type: linear, out: 0}]}\n") ==
        "x.yaml:1: model.layers[0].out: expected an integer >= 1, got '0'");
  CHECK(ErrorOf("model: {input: [4], layers: [{type: dropout, rate: 1}]}\n") ==
        "x.yaml:1: model.layers[0].rate: expected a number in [0, 1), got '1'");
  CHECK(ErrorOf("model: {input: [4], layers: [{type: maxpool, kernel: 2, stride: -1}]}\n") ==
        "x.yaml:1: model.layers[0].stride: expected an integer >= 0, got '-1'");
  CHECK(ErrorOf("model: {input: [4], layers: [{type: linear, out: 2, init_scale: 0}]}\n") ==
        "x.yaml:1: model.layers[0].init_scale: expected a number > 0, got '0'");
  CHECK(ErrorOf("model: {input: [4], layers: [{type: linear, out: 2, init: glorot}]}\n") ==
        "x.yaml:1: model.layers[0].init: expected one of xavier|he|normal|uniform|zeros, got "
        "'glorot'");
  CHECK(ErrorOf("model:\n  sparse_fields: 2\n  wide:\n"
                "    - {type: embedding_bag, vocab: 9, dim: 1, mode: max}\n") ==
        "x.yaml:4: model.wide[0].mode: expected one of sum|mean|concat, got 'max'");
}

TEST_CASE("a model's mistakes name the key") {
  CHECK(ErrorOf("model:\n  input: [4]\n  layers: [relu]\n  deep: [relu]\n") ==
        "x.yaml:4: model.deep: cannot be combined with model.layers (line 3): a model is either "
        "a list of layers or wide/deep towers");
  CHECK(ErrorOf("model:\n  input: [4]\n") ==
        "x.yaml:1: model.layers: required key is missing (or give wide/deep towers)");
  CHECK(ErrorOf("train: {}\nmodel: {}\n") ==
        "x.yaml:2: model.layers: required key is missing (or give wide/deep towers)");
  CHECK(ErrorOf("model:\n  input: [4]\n  layers: []\n") ==
        "x.yaml:3: model.layers: expected a non-empty list of layers, got an empty list");
  CHECK(ErrorOf("model:\n  input: [4]\n  layers: [relu]\n  loss: l1\n") ==
        "x.yaml:4: model.loss: expected one of softmax_cross_entropy|bce_with_logits|mse, got "
        "'l1'");
  CHECK(ErrorOf("model: {input: [4], layers: [relu], device: tpu}\n") ==
        "x.yaml:1: model.device: expected one of cpu|gpu, got 'tpu'");
  CHECK(ErrorOf("model:\n  input: [1, 0, 28]\n  layers: [relu]\n") ==
        "x.yaml:2: model.input[1]: expected an integer >= 1, got '0'");
  CHECK(ErrorOf("model:\n  input: 784\n  layers: [relu]\n") ==
        "x.yaml:2: model.input: expected a non-empty list of integers >= 1, got '784'");
  CHECK(ErrorOf("model:\n  layers:\n    - {type: linear, out: 2}\n") ==
        "x.yaml:1: model.input: required key is missing: model.layers[0] (a linear layer) reads "
        "the dense input");
  CHECK(
      ErrorOf("model:\n  sparse_fields: 2\n  deep:\n    - {type: embedding_bag, vocab: 9, dim: 4}\n"
              "    - concat\n") ==
      "x.yaml:1: model.input: required key is missing: model.deep[1] (a concat layer) reads "
      "the dense input");
  CHECK(ErrorOf("model:\n  wide:\n    - {type: embedding_bag, vocab: 10, dim: 1}\n") ==
        "x.yaml:3: model.wide[0]: an embedding_bag layer reads the sample's ids; set "
        "model.sparse_fields >= 1");
  CHECK(ErrorOf("model:\n  input: [4]\n  layers:\n    - {name: fc, type: linear, out: 4}\n"
                "    - {name: fc, type: linear, out: 2}\n") ==
        "x.yaml:5: model.layers[1].name: 'fc' is already the name of model.layers[0] (line 4); "
        "parameter names must be unique");
}

TEST_CASE("a data section's mistakes name the key") {
  CHECK(ErrorOf("data:\n  train: [a, b]\n") == "x.yaml:1: data.format: required key is missing");
  CHECK(ErrorOf("data: {format: tsv, train: a}\n") ==
        "x.yaml:1: data.format: expected one of idx|criteo|csv|libsvm, got 'tsv'");
  CHECK(ErrorOf("data: {format: criteo}\n") == "x.yaml:1: data.train: required key is missing");
  CHECK(ErrorOf("data:\n  format: criteo\n  train: []\n") ==
        "x.yaml:3: data.train: expected a path or a non-empty list of paths, got an empty list");
  CHECK(ErrorOf("data:\n  format: criteo\n  train:\n") ==
        "x.yaml:3: data.train: expected a path or a non-empty list of paths, got nothing");
  CHECK(ErrorOf("data:\n  format: criteo\n  train: [a, '']\n") ==
        "x.yaml:3: data.train[1]: expected a non-empty string, got ''");
  CHECK(ErrorOf("data:\n  format: idx\n  train: [a, b, c]\n") ==
        "x.yaml:3: data.train: an idx data set is [images, labels], got 3 paths");
  CHECK(ErrorOf("data:\n  format: idx\n  train: [a, b]\n  test: c\n") ==
        "x.yaml:4: data.test: an idx data set is [images, labels], got 1 path");
  CHECK(ErrorOf("data:\n  format: idx\n  train: [a, b]\n  vocab: 100\n") ==
        "x.yaml:4: data.vocab: only used with format: criteo, csv or libsvm (this is idx)");
  CHECK(ErrorOf("data: {format: criteo, train: a, vocab: 0}\n") ==
        "x.yaml:1: data.vocab: expected an integer in 1..1099511627776, got '0'");
  CHECK(ErrorOf("data: {format: criteo, train: a, limit: -1}\n") ==
        "x.yaml:1: data.limit: expected an integer >= 0, got '-1'");
  CHECK(ErrorOf("data: {format: criteo, train: a, shufle: true}\n") ==
        "x.yaml:1: data.shufle: unknown key (allowed: format, train, test, validation, "
        "validation_fraction, vocab, limit, shuffle, columns, delimiter, header, on_bad_row)");
}

TEST_CASE("a csv or libsvm schema is read, and its mistakes name the key") {
  auto data = [](const std::string& rest) { return "data:\n  format: csv\n  train: a\n" + rest; };
  const std::string good =
      "  columns:\n"
      "    - {name: y, type: label, threshold: 0.5}\n"
      "    - {name: age, type: dense, transform: standardize, mean: 40, std: 12, fill: 40}\n"
      "    - {name: city, type: categorical}\n"
      "    - {name: items, type: multi_hot, separator: ';', max_ids: 8, ids: raw}\n"
      "    - {name: note, type: skip}\n";
  auto config = ParseConfig(
      data("  delimiter: \"\\t\"\n  header: true\n  on_bad_row: skip\n" + good), "x.yaml");
  REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  const DataConfig& d = config->data;
  CHECK(d.format == DataFormat::kCsv);
  CHECK(d.delimiter == "\t");
  CHECK(d.header);
  CHECK(d.on_bad_row == OnBadRow::kSkip);
  REQUIRE(d.columns.size() == 5);
  CHECK(d.columns[0].has_threshold);
  CHECK(d.columns[0].threshold == 0.5f);
  CHECK(d.columns[1].transform == DenseTransform::kStandardize);
  CHECK(d.columns[1].mean == 40.0f);
  CHECK(d.columns[1].std == 12.0f);
  CHECK(d.columns[1].fill == 40.0f);
  CHECK(d.columns[2].type == ColumnType::kCategorical);
  CHECK_FALSE(d.columns[2].raw_ids);
  CHECK(d.columns[3].raw_ids);
  CHECK(d.columns[3].separator == ";");
  CHECK(d.columns[3].max_ids == 8);
  CHECK(d.columns[4].type == ColumnType::kSkip);

  CHECK(ErrorOf(data("")) ==
        "x.yaml:1: data.columns: required key is missing: what each column of a csv line is");
  CHECK(ErrorOf(data("  columns: [{name: a, type: dense}]\n")) ==
        "x.yaml:4: data.columns: expected exactly one column of type label, got 0");
  CHECK(ErrorOf(data("  columns: [{name: a, type: label}, {name: a, type: dense}]\n")) ==
        "x.yaml:4: data.columns[1].name: 'a' names another column too");
  CHECK(ErrorOf(data("  columns: [{name: y, type: label, max_ids: 3}]\n")) ==
        "x.yaml:4: data.columns[0].max_ids: not a key of a label column");
  CHECK(ErrorOf(data("  columns: [{name: y, type: label}, {name: m, type: multi_hot}]\n")) ==
        "x.yaml:4: data.columns[1].max_ids: required key of a multi_hot column is missing (the "
        "most values a row holds)");
  CHECK(ErrorOf(data("  columns: [{name: y, type: label}, {name: x, type: dense, mean: 1}]\n")) ==
        "x.yaml:4: data.columns[1].mean: only used with transform: standardize");
  CHECK(ErrorOf(data("  columns: [{name: y, type: label}, {name: x, type: dense, transform: "
                     "standardize, mean: 1}]\n")) ==
        "x.yaml:4: data.columns[1].std: required with transform: standardize (the training "
        "data's mean and std)");
  CHECK(ErrorOf(data("  delimiter: ab\n" + good)) ==
        "x.yaml:4: data.delimiter: expected one character (\"\\t\" for tabs), got 'ab'");
  CHECK(ErrorOf(data("  delimiter: ';'\n" + good)) ==
        "x.yaml:9: data.columns[3].separator: ';' holds data.delimiter ';', which ends the column");
  CHECK(ErrorOf("data:\n  format: criteo\n  train: a\n" + good) ==
        "x.yaml:4: data.columns: only used with format: csv or libsvm (criteo's are fixed) (this "
        "is criteo)");
  std::string wide = "  columns:\n    - {name: y, type: label}\n";
  for (int i = 0; i < 11; ++i)
    wide += "    - {name: m" + std::to_string(i) + ", type: multi_hot, max_ids: 100000}\n";
  CHECK(ErrorOf(data(wide)) ==
        "x.yaml:16: data.columns[11]: the id columns up to here give a sample 1100000 id slots; at "
        "most 1048576 in all");
  CHECK(ErrorOf("data:\n  format: libsvm\n  train: a\n  header: true\n" + good) ==
        "x.yaml:4: data.header: only used with format: csv (this is libsvm)");
  CHECK(ErrorOf("data:\n  format: libsvm\n  train: a\n" + good) ==
        "x.yaml:4: data.columns: a libsvm line is a label and then its id:value pairs: expected "
        "[{type: label}, {type: multi_hot, max_ids: N}]");
}

TEST_CASE("a schema must give the model what it reads") {
  const std::string data =
      "data:\n  format: csv\n  train: a\n  columns:\n    - {name: y, type: label}\n"
      "    - {name: x, type: dense}\n    - {name: c, type: categorical}\n"
      "    - {name: m, type: multi_hot, max_ids: 3}\n";
  const std::string layers =
      "  layers: [{type: embedding_bag, vocab: 10, dim: 2}, {type: linear, out: 1}]\n";
  CHECK(
      ParseConfig("model:\n  sparse_fields: 4\n  loss: bce_with_logits\n" + layers + data, "x.yaml")
          .ok());
  CHECK(ErrorOf("model:\n  sparse_fields: 3\n  loss: bce_with_logits\n" + layers + data) ==
        "x.yaml:2: model.sparse_fields: is 3, but data.columns (line 8) give a sample 4 id slots "
        "(one per categorical column, max_ids per multi_hot column)");
  CHECK(ErrorOf("model:\n  input: [2]\n  sparse_fields: 4\n  loss: bce_with_logits\n" + layers +
                data) ==
        "x.yaml:2: model.input: expected [1]: data.columns (line 9) have 1 dense columns");
}

}  // namespace
}  // namespace pstrain
