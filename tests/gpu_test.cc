// Tests for src/gpu. Everywhere: the messages a user gets when there is no
// GPU (or no CUDA in the build) and when a model has layers the GPU path
// cannot run. Where a GPU is visible: GPU training steps give the CPU
// model's loss, logits and gradients (LeNet, every other layer option,
// Wide&Deep towers with embedding bags of each mode, whose tables travel
// only in the rows a batch uses), and NCCL with a world of one. The cases
// that need a GPU (or its absence) are suites of their own, which CTest
// reports as skipped where they cannot run (tests/test_util.h). A LeNet
// throughput benchmark is here too, skipped by default:
//   ./gpu_test --run-suite=gpu_device -tc='*throughput*' --no-skip
#include "src/gpu/gpu.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "src/common/config/config.h"
#include "src/nn/model.h"
#include "tests/lenet_config.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

constexpr uint64_t kSeed = 7;

// The suites of cases that can run only with a GPU, with a GPU and NCCL, or
// without a GPU.
constexpr char kGpuDevice[] = "gpu_device";
constexpr char kGpuNccl[] = "gpu_nccl";
constexpr char kNoGpu[] = "gpu_absent";
const bool kSuitesRegistered =
    testing::SuiteNeeds(kGpuDevice, [] { return CheckGpuVisible(); }) &&
    testing::SuiteNeeds(kGpuNccl,
                        [] {
                          PSTRAIN_RETURN_IF_ERROR(CheckGpuVisible());
                          return NcclUniqueIdBytes().status();
                        }) &&
    testing::SuiteNeeds(kNoGpu, [] {
      return CheckGpuVisible().ok()
                 ? FailedPrecondition("a GPU is visible (" + GpuDescription() + ")")
                 : Status::OK();
    });

using testing::Conv;
using testing::LeNet;
using testing::Linear;
using testing::Spec;
using testing::Window;

// The layers and options LeNet leaves out: strided and bias-free conv,
// avgpool with padding, overlapping maxpool, sigmoid, tanh, dropout, bce.
ModelConfig Other() {
  ModelConfig config;
  config.input = {3, 11, 9};
  LayerConfig conv = Conv(5, 3, 2, 1);
  conv.bias = false;
  LayerConfig dropout = Spec(LayerType::kDropout);
  dropout.rate = 0.3f;
  config.layers = {conv,
                   Spec(LayerType::kTanh),
                   Window(LayerType::kAvgpool, 3, 1, 1),
                   Conv(4, 2),
                   Spec(LayerType::kSigmoid),
                   Window(LayerType::kMaxpool, 3, 1, 1),
                   Spec(LayerType::kFlatten),
                   dropout,
                   Linear(7),
                   Spec(LayerType::kTanh),
                   Linear(1)};
  config.loss = LossType::kBceWithLogits;
  return config;
}

LayerConfig Bag(int64_t vocab, int64_t dim, const char* mode, int line = 0) {
  LayerConfig bag = Spec(LayerType::kEmbeddingBag, line);
  bag.vocab = vocab;
  bag.dim = dim;
  bag.mode = mode;
  bag.init = "normal";
  bag.init_scale = 0.5f;
  return bag;
}

// configs/wide_deep_criteo.yaml in small: a wide sum bag, a deep concat bag
// with the dense features appended. Few rows, so ids repeat in a batch and
// their gradients add up.
ModelConfig WideDeep() {
  ModelConfig config;
  config.input = {5};
  config.sparse_fields = 4;
  config.loss = LossType::kBceWithLogits;
  config.wide = {Bag(30, 1, "sum")};
  config.deep = {Bag(30, 3, "concat"), Spec(LayerType::kConcat), Linear(8), Spec(LayerType::kRelu),
                 Linear(1)};
  return config;
}

// A sequential model that starts with a mean bag.
ModelConfig MeanBag() {
  ModelConfig config;
  config.input = {6};
  config.sparse_fields = 3;
  config.layers = {Bag(20, 4, "mean"), Linear(5), Spec(LayerType::kTanh), Linear(3)};
  return config;
}

Batch RandomBatch(const ModelConfig& config, int64_t n, int classes, std::mt19937* rng) {
  Batch batch;
  Shape shape{n};
  shape.insert(shape.end(), config.input.begin(), config.input.end());
  batch.dense = Tensor(shape);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  for (float& x : batch.dense.data) x = pixel(*rng);
  for (int64_t i = 0; i < n; ++i) batch.labels.push_back(static_cast<float>((*rng)() % classes));
  // Ids below the smallest table's rows (both towers read the same ids).
  int64_t vocab = 0;
  for (const auto* list : {&config.layers, &config.wide, &config.deep})
    for (const LayerConfig& c : *list)
      if (c.type == LayerType::kEmbeddingBag)
        vocab = vocab == 0 ? c.vocab : std::min(vocab, c.vocab);
  batch.fields = config.sparse_fields;
  for (int64_t i = 0; vocab > 0 && i < n * config.sparse_fields; ++i)
    batch.sparse.push_back(static_cast<int64_t>((*rng)() % vocab));
  return batch;
}

// A copy of a tensor's values (whatever container Tensor uses).
template <typename Container>
std::vector<float> Values(const Container& data) {
  return std::vector<float>(data.begin(), data.end());
}

// Summation orders differ (cuBLAS, the kernels' gathers), so elements that
// are small because of cancellation carry more relative error than the
// tensor as a whole: compare max |cpu - gpu| with max |cpu| over the tensor.
void ExpectClose(const std::vector<float>& cpu, const std::vector<float>& gpu,
                 const std::string& what) {
  REQUIRE(cpu.size() == gpu.size());
  double scale = 1e-12, worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(cpu[i])));
    const double e = std::fabs(static_cast<double>(cpu[i]) - gpu[i]);
    if (e > worst) worst = e, at = i;
  }
  INFO(what << ": worst difference " << worst << " at " << at << " (cpu " << cpu[at] << ", gpu "
            << gpu[at] << "), largest value " << scale);
  CHECK(worst / scale < 1e-4);
}

// Trains the CPU model and a GpuModel on its params side by side for a few
// SGD steps (so UploadWeights is exercised too), comparing every output.
void CompareWithCpu(const ModelConfig& config, int classes, int64_t n) {
  auto cpu = Model::Build(config, kSeed);
  REQUIRE(cpu.ok());
  const std::vector<Param*>& params = (*cpu)->params();
  auto gpu = GpuModel::Build(config, params, kSeed);
  INFO(gpu.status().ToString());
  REQUIRE(gpu.ok());
  std::mt19937 rng(3);
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    const Batch batch = RandomBatch(config, n, classes, &rng);
    const Tensor cpu_logits = (*cpu)->Forward(batch, true);
    const float cpu_loss = (*cpu)->Backward(batch).value();
    std::vector<std::vector<float>> cpu_grads;
    for (Param* p : params) cpu_grads.push_back(Values(p->grad.data));

    auto logits = (*gpu)->Forward(batch, true);
    REQUIRE(logits.ok());
    CHECK((*logits)->shape == cpu_logits.shape);
    ExpectClose(Values(cpu_logits.data), Values((*logits)->data), "logits");
    auto loss = (*gpu)->Backward(batch);
    REQUIRE(loss.ok());
    CHECK(std::fabs(cpu_loss - *loss) <= 1e-5 * std::fabs(cpu_loss));
    for (size_t i = 0; i < params.size(); ++i) {
      ExpectClose(cpu_grads[i], Values(params[i]->grad.data), params[i]->name);
    }
    for (Param* p : params) {
      for (size_t k = 0; k < p->value.data.size(); ++k) p->value.data[k] -= 0.1f * p->grad.data[k];
    }
    REQUIRE((*gpu)->UploadWeights().ok());
  }
}

TEST_CASE("without a GPU, CheckGpuVisible says why, in words a user understands") {
  const Status visible = CheckGpuVisible();
  if (visible.ok()) {
    MESSAGE("a GPU is visible: " << GpuDescription());
    CHECK(GpuBuildEnabled());
    return;
  }
  INFO(visible.message());
  CHECK(visible.code() == StatusCode::kFailedPrecondition);
  CHECK(visible.message().rfind("model.device: gpu, but ", 0) == 0);
  if (GpuBuildEnabled()) {
    CHECK(visible.message().find("no GPU is visible") != std::string::npos);
    CHECK(visible.message().find("CUDA_VISIBLE_DEVICES") != std::string::npos);
  } else {
    CHECK(visible.message().find("built without CUDA") != std::string::npos);
  }
}

TEST_CASE("every layer type and Wide&Deep towers run on the GPU; a type it lacks is named") {
  CHECK(CheckGpuModelSupported(LeNet()).ok());
  CHECK(CheckGpuModelSupported(Other()).ok());
  CHECK(CheckGpuModelSupported(WideDeep()).ok());
  CHECK(CheckGpuModelSupported(MeanBag()).ok());

  // A layer type src/nn might gain before src/gpu does.
  ModelConfig future = WideDeep();
  future.deep[3] = Spec(static_cast<LayerType>(99), 12);
  Status s = CheckGpuModelSupported(future);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "model.deep[3] (unknown, line 12): not supported on the GPU");
  // Build refuses it the same way, device or not.
  auto model = GpuModel::Build(future, {}, kSeed);
  REQUIRE(!model.ok());
  CHECK(model.status().message() == s.message());
  // The CPU's layers the GPU path lacks.
  for (LayerType cpu_only : {LayerType::kGelu, LayerType::kLayerNorm, LayerType::kResidual,
                             LayerType::kAugment, LayerType::kBatchNorm}) {
    future.deep[3] = Spec(cpu_only, 7);
    CHECK(CheckGpuModelSupported(future).message() == "model.deep[3] (" +
                                                          std::string(LayerTypeName(cpu_only)) +
                                                          ", line 7): not supported on the GPU");
  }
}

// configs/lenet_gpu.yaml must stay the CPU LeNet config on the GPU, one
// worker of 128 doing what two of 64 do, or its accuracy says nothing.
TEST_CASE("configs/lenet_gpu.yaml is lenet_fashion_mnist.yaml on the GPU with one worker of 128") {
  const std::string here = __FILE__;
  const std::string repo = here.substr(0, here.size() - std::string("tests/gpu_test.cc").size());
  auto cpu = LoadConfig(repo + "configs/lenet_fashion_mnist.yaml");
  auto gpu = LoadConfig(repo + "configs/lenet_gpu.yaml");
  REQUIRE_MESSAGE(cpu.ok(), cpu.status().message());
  REQUIRE_MESSAGE(gpu.ok(), gpu.status().message());
  CHECK(cpu->model.device == Device::kCpu);
  CHECK(gpu->model.device == Device::kGpu);
  CHECK(CheckGpuModelSupported(gpu->model).ok());
  CHECK(gpu->model.input == cpu->model.input);
  REQUIRE(gpu->model.layers.size() == cpu->model.layers.size());
  for (size_t i = 0; i < cpu->model.layers.size(); ++i) {
    const LayerConfig &a = cpu->model.layers[i], &b = gpu->model.layers[i];
    CAPTURE(i);
    CHECK(a.type == b.type);
    CHECK(a.name == b.name);
    CHECK(a.out == b.out);
    CHECK(a.out_channels == b.out_channels);
    CHECK(a.kernel == b.kernel);
    CHECK(a.padding == b.padding);
  }
  CHECK(gpu->data.train == cpu->data.train);
  CHECK(gpu->data.test == cpu->data.test);
  CHECK(gpu->train.batch_size == 2 * cpu->train.batch_size);
  CHECK(gpu->train.epochs == cpu->train.epochs);
  CHECK(gpu->train.mode == cpu->train.mode);
  CHECK(gpu->train.seed == cpu->train.seed);
  const OptimizerConfig &a = cpu->train.optimizer, &b = gpu->train.optimizer;
  CHECK(a.type == b.type);
  CHECK(a.lr == b.lr);
  CHECK(a.momentum == b.momentum);
  CHECK(a.weight_decay == b.weight_decay);
  CHECK(a.lr_decay_steps == b.lr_decay_steps);
  CHECK(a.lr_decay == b.lr_decay);
  REQUIRE(gpu->parameters.size() == cpu->parameters.size());
  for (size_t i = 0; i < cpu->parameters.size(); ++i) {
    CHECK(gpu->parameters[i].match == cpu->parameters[i].match);
    CHECK(gpu->parameters[i].ps == cpu->parameters[i].ps);
  }
}

TEST_CASE("without a GPU, GpuModel::Build and NCCL fail cleanly" * doctest::test_suite(kNoGpu)) {
  auto cpu = Model::Build(LeNet(), kSeed);
  REQUIRE(cpu.ok());
  auto gpu = GpuModel::Build(LeNet(), (*cpu)->params(), kSeed);
  REQUIRE(!gpu.ok());
  CHECK(gpu.status().code() == StatusCode::kFailedPrecondition);
  CHECK(gpu.status().message() == CheckGpuVisible().message());

  auto id = NcclUniqueIdBytes();
  auto comm = NcclCommunicator::Create(0, 1, id.ok() ? *id : std::string(128, '\0'));
  REQUIRE(!comm.ok());
  CHECK(comm.status().code() == StatusCode::kFailedPrecondition);
  CHECK(!DeviceBuffer::Create(16).ok());
}

TEST_CASE("GPU: LeNet's loss, logits and gradients match the CPU model's" *
          doctest::test_suite(kGpuDevice)) {
  MESSAGE("on " << GpuDescription());
  CompareWithCpu(LeNet(), 10, 32);
}

TEST_CASE("GPU: strided conv, padded pools, sigmoid, tanh, dropout and bce match the CPU" *
          doctest::test_suite(kGpuDevice)) {
  CompareWithCpu(Other(), 2, 17);
}

TEST_CASE("GPU: Wide&Deep towers (sum and concat bags, concat, linear) match the CPU" *
          doctest::test_suite(kGpuDevice)) {
  CompareWithCpu(WideDeep(), 2, 33);
}

TEST_CASE("GPU: a mean embedding bag in a sequential model matches the CPU" *
          doctest::test_suite(kGpuDevice)) {
  CompareWithCpu(MeanBag(), 3, 9);
}

// Wide&Deep with tables far larger than a batch's ids, as a worker's
// server-held tables are (room for every id of a batch).
ModelConfig WideDeepLarge() {
  ModelConfig config = WideDeep();
  config.wide[0].vocab = 4000;
  config.deep[0] = Bag(4000, 8, "concat");
  return config;
}

// One training step of the CPU model `cpu` and of `gpu`, compared;
// `grad_of(i)` is where the GPU left param i's gradient. Returns the bytes
// the GPU step copied between host and device.
int64_t CompareStep(Model& cpu, GpuModel& gpu, const Batch& batch,
                    const std::function<std::vector<float>(size_t)>& grad_of) {
  const Tensor cpu_logits = cpu.Forward(batch, true);
  const float cpu_loss = cpu.Backward(batch).value();
  const int64_t before = gpu.CopiedBytes();
  REQUIRE(gpu.UploadWeights().ok());
  auto logits = gpu.Forward(batch, true);
  REQUIRE(logits.ok());
  ExpectClose(Values(cpu_logits.data), Values((*logits)->data), "logits");
  auto loss = gpu.Backward(batch);
  REQUIRE(loss.ok());
  CHECK(std::fabs(cpu_loss - *loss) <= 1e-5 * std::fabs(cpu_loss));
  const std::vector<Param*>& params = cpu.params();
  for (size_t i = 0; i < params.size(); ++i)
    ExpectClose(Values(params[i]->grad.data), grad_of(i), params[i]->name);
  return gpu.CopiedBytes() - before;
}

// Three steps (ids 0..19, ids spread over the table, 0..19 again) on
// WideDeepLarge, the tables' host side in their Params or, with `pin`, in
// PinTable's memory.
void CheckRowsTravel(bool pin) {
  CAPTURE(pin);
  const ModelConfig config = WideDeepLarge();
  // `cpu` is the reference; the GPU model runs on the params of `host`,
  // built the same (same seed, same weights).
  auto cpu = Model::Build(config, kSeed);
  auto host = Model::Build(config, kSeed);
  REQUIRE(cpu.ok());
  REQUIRE(host.ok());
  const std::vector<Param*>& params = (*cpu)->params();
  const std::vector<Param*>& mine = (*host)->params();
  int64_t table_bytes = 0;
  std::vector<bool> is_table(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    is_table[i] = params[i]->value.shape.size() == 2 && params[i]->value.shape[0] == 4000;
    if (is_table[i]) table_bytes += 4 * params[i]->value.size();
  }
  REQUIRE(std::count(is_table.begin(), is_table.end(), true) == 2);
  std::mt19937 rng(13);
  Batch batch = RandomBatch(config, 40, 2, &rng);
  // Ids renumbered 0..19, as a worker's server-held tables get them.
  for (size_t k = 0; k < batch.sparse.size(); ++k) batch.sparse[k] = (k * 7) % 20;
  Batch scattered = batch;  // and ids spread over the table
  for (int64_t& id : scattered.sparse) id = id * 197 + 3;

  auto gpu = GpuModel::Build(config, mine, kSeed);
  REQUIRE(gpu.ok());
  std::vector<GpuModel::PinnedTable> pinned(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!is_table[i]) {
      CHECK((*gpu)->PinTable(i).status().code() == StatusCode::kInvalidArgument);
      continue;
    }
    if (!pin) continue;
    auto table = (*gpu)->PinTable(i);
    REQUIRE(table.ok());
    pinned[i] = *table;
    const int64_t n = params[i]->value.size();
    CHECK(std::vector<float>(table->values, table->values + n) == Values(params[i]->value.data));
    // From now on the Param's tensors are neither read nor written.
    std::fill(mine[i]->value.data.begin(), mine[i]->value.data.end(), NAN);
    std::fill(mine[i]->grad.data.begin(), mine[i]->grad.data.end(), NAN);
  }
  auto grad_of = [&](size_t i) {
    if (pinned[i].grads == nullptr) return Values(mine[i]->grad.data);
    return std::vector<float>(pinned[i].grads, pinned[i].grads + mine[i]->grad.size());
  };
  for (const Batch* b : {&batch, &scattered, &batch}) {
    const int64_t bytes = CompareStep(**cpu, **gpu, *b, grad_of);
    MESSAGE("pinned " << pin << ": a step copied " << bytes << " bytes; the tables are "
                      << table_bytes);
    CHECK(bytes < table_bytes / 4);
    // The CPU's update, given to the GPU's params (or pinned tables, as a
    // worker's pulls write them), so that the next step's rows differ.
    for (size_t i = 0; i < params.size(); ++i) {
      Param& p = *params[i];
      for (size_t k = 0; k < p.value.data.size(); ++k) p.value.data[k] -= 0.5f * p.grad.data[k];
      if (pinned[i].values != nullptr) {
        std::copy(p.value.data.begin(), p.value.data.end(), pinned[i].values);
      } else {
        std::copy(p.value.data.begin(), p.value.data.end(), mine[i]->value.data.begin());
      }
    }
  }
  if (pin) {
    for (size_t i = 0; i < params.size(); ++i)
      if (is_table[i]) CHECK(std::isnan(mine[i]->grad.data[0]));
  }
}

TEST_CASE("GPU: only the rows a batch's ids name travel, from the Params or pinned tables" *
          doctest::test_suite(kGpuDevice)) {
  CheckRowsTravel(false);
  CheckRowsTravel(true);
}

TEST_CASE("GPU: sparse ids outside the table or of the wrong count are refused, not read" *
          doctest::test_suite(kGpuDevice)) {
  auto cpu = Model::Build(WideDeep(), kSeed);
  REQUIRE(cpu.ok());
  auto gpu = GpuModel::Build(WideDeep(), (*cpu)->params(), kSeed);
  REQUIRE(gpu.ok());
  std::mt19937 rng(11);
  const Batch batch = RandomBatch(WideDeep(), 8, 2, &rng);
  REQUIRE((*gpu)->Forward(batch, true).ok());
  for (int64_t bad : {int64_t{30}, int64_t{-1}, int64_t{1} << 40}) {
    Batch outside = batch;
    outside.sparse[13] = bad;
    const Status s = (*gpu)->Forward(outside, true).status();
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message() == "GPU forward: sparse id " + std::to_string(bad) +
                             " of sample 3 is outside the embedding table [0, 30)");
  }
  Batch short_ids = batch;
  short_ids.sparse.pop_back();
  CHECK((*gpu)->Forward(short_ids, true).status().code() == StatusCode::kInvalidArgument);
  // A refused batch leaves nothing to differentiate.
  CHECK((*gpu)->Backward(batch).status().code() == StatusCode::kFailedPrecondition);
  REQUIRE((*gpu)->Forward(batch, true).ok());
  CHECK((*gpu)->Backward(batch).ok());
}

TEST_CASE("GPU: Backward needs a training Forward, and a batch must fit the input" *
          doctest::test_suite(kGpuDevice)) {
  auto cpu = Model::Build(LeNet(), kSeed);
  REQUIRE(cpu.ok());
  auto gpu = GpuModel::Build(LeNet(), (*cpu)->params(), kSeed);
  REQUIRE(gpu.ok());
  std::mt19937 rng(5);
  const Batch batch = RandomBatch(LeNet(), 4, 10, &rng);
  CHECK((*gpu)->Backward(batch).status().code() == StatusCode::kFailedPrecondition);
  REQUIRE((*gpu)->Forward(batch, false).ok());
  CHECK((*gpu)->Backward(batch).status().code() == StatusCode::kFailedPrecondition);
  Batch wrong = batch;
  wrong.dense.Resize({4, 1, 28, 27});
  CHECK((*gpu)->Forward(wrong, true).status().code() == StatusCode::kInvalidArgument);
  Batch bad_label = batch;
  bad_label.labels[2] = 10.0f;
  REQUIRE((*gpu)->Forward(bad_label, true).ok());
  CHECK((*gpu)->Backward(bad_label).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("GPU: NCCL with a world of one: all-reduce and broadcast keep the data" *
          doctest::test_suite(kGpuNccl)) {
  auto id = NcclUniqueIdBytes();
  REQUIRE_MESSAGE(id.ok(), id.status().message());
  auto comm = NcclCommunicator::Create(0, 1, *id);
  INFO(comm.status().ToString());
  REQUIRE(comm.ok());
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 7.0f;
  auto buffer = DeviceBuffer::Create(static_cast<int64_t>(values.size()));
  REQUIRE(buffer.ok());
  REQUIRE((*buffer)->CopyFromHost(values).ok());
  for (bool average : {true, false}) {
    REQUIRE((*comm)->AllReduce((*buffer)->data(), (*buffer)->size(), average).ok());
    REQUIRE((*comm)->Synchronize().ok());
    auto back = (*buffer)->CopyToHost();
    REQUIRE(back.ok());
    CHECK(*back == values);
  }
  REQUIRE((*comm)->Broadcast((*buffer)->data(), (*buffer)->size(), 0).ok());
  CHECK((*comm)->Broadcast((*buffer)->data(), (*buffer)->size(), 1).code() ==
        StatusCode::kInvalidArgument);
  auto back = (*buffer)->CopyToHost();
  REQUIRE(back.ok());
  CHECK(*back == values);
  CHECK(!NcclCommunicator::Create(0, 1, "short").ok());
}

TEST_CASE("GPU: on_device_grads sees every gradient, and can all-reduce it on the model's stream" *
          doctest::test_suite(kGpuNccl)) {
  auto id = NcclUniqueIdBytes();
  REQUIRE_MESSAGE(id.ok(), id.status().message());
  auto cpu = Model::Build(LeNet(), kSeed);
  REQUIRE(cpu.ok());
  const std::vector<Param*>& params = (*cpu)->params();
  auto gpu = GpuModel::Build(LeNet(), params, kSeed);
  REQUIRE(gpu.ok());
  auto comm = NcclCommunicator::Create(0, 1, *id, (*gpu)->stream());
  REQUIRE(comm.ok());
  std::vector<size_t> seen;
  (*gpu)->on_device_grads = [&](size_t index, float* grad, int64_t n) {
    seen.push_back(index);
    CHECK(n == params[index]->grad.size());
    return (*comm)->AllReduce(grad, n, true);
  };
  std::mt19937 rng(9);
  const Batch batch = RandomBatch(LeNet(), 16, 10, &rng);
  (*cpu)->Forward(batch, true);
  REQUIRE((*cpu)->Backward(batch).ok());
  std::vector<std::vector<float>> cpu_grads;
  for (Param* p : params) cpu_grads.push_back(Values(p->grad.data));
  REQUIRE((*gpu)->Forward(batch, true).ok());
  REQUIRE((*gpu)->Backward(batch).ok());
  CHECK(seen.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ExpectClose(cpu_grads[i], Values(params[i]->grad.data), params[i]->name);
  }
  (*gpu)->on_device_grads = [](size_t, float*, int64_t) { return Unavailable("peer left"); };
  REQUIRE((*gpu)->Forward(batch, true).ok());
  const Status failed = (*gpu)->Backward(batch).status();
  CHECK(failed.code() == StatusCode::kUnavailable);
  CHECK(failed.message() == "gradient of conv2d0.weight: peer left");
}

// Not a test: LeNet forward + backward + gradient copy to the host on the
// GPU, in samples/s (the weights are uploaded every step, as in training).
TEST_CASE("GPU LeNet training throughput, batch 64" * doctest::test_suite(kGpuDevice) *
          doctest::skip()) {
  auto cpu = Model::Build(LeNet(), kSeed);
  REQUIRE(cpu.ok());
  auto gpu = GpuModel::Build(LeNet(), (*cpu)->params(), kSeed);
  REQUIRE(gpu.ok());
  std::mt19937 rng(1);
  const Batch batch = RandomBatch(LeNet(), 64, 10, &rng);
  auto step = [&] {
    REQUIRE((*gpu)->UploadWeights().ok());
    REQUIRE((*gpu)->Forward(batch, true).ok());
    REQUIRE((*gpu)->Backward(batch).ok());
  };
  for (int i = 0; i < 20; ++i) step();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) step();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  MESSAGE("GPU LeNet step (" << GpuDescription() << "): " << 300 * 64 / took.count()
                             << " samples/s");
}

}  // namespace
}  // namespace pstrain
