// The all-reduce path of threshold compression
// (roles/worker/allreduced_weights.h), workers as threads on a TCP ring of
// this process: threshold-compressed gradients are all-gathered and their
// average applied, and the copies stay identical bit for bit over many steps
// with 2 and 3 workers; a bad (or random) message from a peer is an error
// naming it; a checkpoint keeps every worker's residuals, so a resumed pair
// goes on bit for bit; parameter averaging (train.mode: average) lets the
// copies drift apart between averagings and makes them identical at each; a
// compressed momentum tensor is momentum-corrected (masked momentum encoded,
// sgd applied) as the rule written out in tests/threshold_oracle.h says, and
// its checkpoint has no momentum slot; a layer's statistics are never
// reduced nor optimized, but averaged when asked (checkpoints, epoch ends)
// or after every step (sync_stats).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective/local_ring.h"
#include "roles/worker/allreduced_weights.h"
#include "src/common/checkpoint_file.h"
#include "tests/rank_threads.h"
#include "tests/threshold_oracle.h"

namespace pstrain {
namespace {

using testing::OnEveryRank;
using testing::RequireAllOk;

// One worker's copy of a small model: tensors of odd sizes, a bias among them.
struct Copy {
  std::vector<std::unique_ptr<Param>> params;
  std::unique_ptr<AllReducedWeights> weights;
};

const int64_t kSizes[] = {5003, 10, 777};

Copy MakeCopy(const Config& config) {
  Copy copy;
  std::vector<Param*> raw;
  for (size_t t = 0; t < std::size(kSizes); ++t) {
    auto p = std::make_unique<Param>();
    p->name = "fc" + std::to_string(t + 1) + ".weight";
    p->value = Tensor({kSizes[t]});
    p->grad = Tensor({kSizes[t]});
    for (int64_t i = 0; i < kSizes[t]; ++i) p->value.data[i] = 0.01f * static_cast<float>(i % 13);
    raw.push_back(p.get());
    copy.params.push_back(std::move(p));
  }
  auto weights = AllReducedWeights::Create(config, raw);
  REQUIRE_MESSAGE(weights.ok(), weights.status().message());
  copy.weights = std::move(*weights);
  return copy;
}

// A gradient that differs per worker, step and element, of mixed signs and
// magnitudes around the threshold.
void FillGradients(Copy& copy, int rank, int step) {
  for (auto& p : copy.params)
    for (int64_t i = 0; i < p->grad.size(); ++i) {
      const uint32_t h = static_cast<uint32_t>((i + 1) * 2654435761u) ^
                         static_cast<uint32_t>(step * 40503 + rank * 9973);
      p->grad.data[i] = (static_cast<float>(h % 20001) - 10000.0f) * 1e-7f * (1 + rank);
    }
}

Config CompressedConfig() {
  Config config;
  config.train.optimizer.type = OptimizerType::kMomentum;
  config.train.optimizer.lr = 0.1f;
  config.train.compression.type = CompressionType::kThreshold;
  config.train.compression.threshold = 2e-4f;
  config.train.compression.shake_up_every = 7;
  config.train.compression.warmup_epochs = 0;  // the codec past its warm-up
  return config;
}

std::vector<float> Values(const Param& p) { return {p.value.data.begin(), p.value.data.end()}; }

bool SameBits(const Copy& a, const Copy& b) {
  for (size_t t = 0; t < a.params.size(); ++t)
    if (std::memcmp(a.params[t]->value.ptr(), b.params[t]->value.ptr(),
                    sizeof(float) * static_cast<size_t>(a.params[t]->value.size())) != 0)
      return false;
  return true;
}

std::unique_ptr<LocalRing> MakeRing(int world) {
  auto ring = LocalRing::Create(world);
  REQUIRE_MESSAGE(ring.ok(), ring.status().message());
  return std::move(*ring);
}

TEST_CASE("compressed all-reduced weights: copies identical bit for bit after many steps") {
  for (int world : {2, 3}) {
    CAPTURE(world);
    const Config config = CompressedConfig();
    auto ring = MakeRing(world);
    std::vector<Copy> copies;
    for (int r = 0; r < world; ++r) copies.push_back(MakeCopy(config));
    const std::vector<float> initial = Values(*copies[0].params[0]);
    const int steps = 300;
    RequireAllOk(OnEveryRank(world, [&](int r) -> Status {
      PSTRAIN_RETURN_IF_ERROR(copies[r].weights->BroadcastFromChief(ring->rank(r), 0));
      for (int s = 0; s < steps; ++s) {
        FillGradients(copies[r], r, s);
        PSTRAIN_RETURN_IF_ERROR(copies[r].weights->ReduceAndApply(ring->rank(r)));
      }
      return Status::OK();
    }));
    for (int r = 1; r < world; ++r) REQUIRE(SameBits(copies[0], copies[r]));
    CHECK(Values(*copies[0].params[0]) != initial);  // it trained
    // Compression happened: every worker sent every tensor every step, and
    // far fewer bytes than dense floats.
    const CompressionCounters c = copies[1].weights->compression_counters();
    CHECK(c.messages == steps * static_cast<int64_t>(std::size(kSizes)));
    CHECK(c.sent > 0);
    CHECK(c.bytes * 20 < c.elements * static_cast<int64_t>(sizeof(float)));
  }
}

TEST_CASE("compressed all-reduced weights: the gradient applied is the average of +-tau sent") {
  // Plain SGD with lr 1: the change of a value is minus the decoded gradient.
  Config config;
  config.train.optimizer.lr = 1.0f;
  config.train.compression.type = CompressionType::kThreshold;
  config.train.compression.threshold = 0.5f;
  config.train.compression.adaptive = false;
  // The rule at a fixed tau, written out below: no warm-up picking tau.
  config.train.compression.warmup_epochs = 0;
  auto ring = MakeRing(2);
  std::vector<Copy> copies;
  for (int r = 0; r < 2; ++r) copies.push_back(MakeCopy(config));
  std::vector<std::vector<float>> before;
  for (auto& p : copies[0].params) before.push_back(Values(*p));
  RequireAllOk(OnEveryRank(2, [&](int r) {
    // Worker 0: 1.0 everywhere (sends +0.5); worker 1: -1.0 at even indices
    // (sends -0.5 there), 0.1 elsewhere (under tau: kept for later).
    for (auto& p : copies[r].params)
      for (int64_t i = 0; i < p->grad.size(); ++i)
        p->grad.data[i] = r == 0 ? 1.0f : (i % 2 == 0 ? -1.0f : 0.1f);
    return copies[r].weights->ReduceAndApply(ring->rank(r));
  }));
  for (size_t t = 0; t < copies[0].params.size(); ++t)
    for (int64_t i = 0; i < kSizes[t]; ++i) {
      const float applied = before[t][i] - copies[0].params[t]->value.data[i];
      REQUIRE(applied == (i % 2 == 0 ? 0.0f : 0.25f));
    }
}

TEST_CASE("momentum correction: workers encode masked momentum, every copy runs sgd") {
  constexpr int kWorkers = 3, kSteps = 8;
  constexpr int64_t kElements = 50;
  constexpr float kTau = 0.02f, kM = 0.9f, kLr = 0.5f, kDecay = 0.1f;
  auto gradient = [](int rank, int64_t step, int64_t i) {
    return 0.01f * static_cast<float>(rank + 1) * static_cast<float>((i + step) % 5 - 2);
  };
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    Config config;
    config.train.optimizer.type = OptimizerType::kMomentum;
    config.train.optimizer.momentum = kM;
    config.train.optimizer.nesterov = nesterov;
    config.train.optimizer.lr = kLr;
    config.train.optimizer.weight_decay = kDecay;
    config.train.optimizer.lr_decay_steps = 4;  // lr halves after step 4
    config.train.optimizer.lr_decay = 0.5f;
    config.train.compression.type = CompressionType::kThreshold;
    config.train.compression.threshold = kTau;
    config.train.compression.adaptive = false;
    // The rule at a fixed tau, written out below: no warm-up picking tau.
    config.train.compression.warmup_epochs = 0;
    auto ring = MakeRing(kWorkers);
    std::vector<Copy> copies(kWorkers);
    for (Copy& copy : copies) {
      auto p = std::make_unique<Param>();
      p->name = "w";
      p->value = Tensor({kElements});
      p->grad = Tensor({kElements});
      std::fill(p->value.data.begin(), p->value.data.end(), 1.0f);
      auto weights = AllReducedWeights::Create(config, {p.get()});
      REQUIRE_MESSAGE(weights.ok(), weights.status().message());
      copy.weights = std::move(*weights);
      copy.params.push_back(std::move(p));
    }
    RequireAllOk(OnEveryRank(kWorkers, [&](int r) -> Status {
      PSTRAIN_RETURN_IF_ERROR(copies[r].weights->BroadcastFromChief(ring->rank(r), 0));
      for (int64_t step = 0; step < kSteps; ++step) {
        Param& p = *copies[r].params[0];
        for (int64_t i = 0; i < kElements; ++i) p.grad.data[i] = gradient(r, step, i);
        PSTRAIN_RETURN_IF_ERROR(copies[r].weights->ReduceAndApply(ring->rank(r)));
      }
      return Status::OK();
    }));
    // The rule (tests/threshold_oracle.h); and the same without masking,
    // which must not match (masking matters on this stream).
    testing::ThresholdRun run = testing::MakeThresholdRun(kWorkers, kSteps, kElements, kTau,
                                                          config.train.optimizer, gradient);
    const testing::ThresholdOutcome rule = testing::ThresholdOracle(run);
    run.mask = false;
    const std::vector<float> unmasked = testing::ThresholdOracle(run).weights;
    const std::vector<float>& expected = rule.weights;
    const int64_t masked = rule.masked;
    CHECK(masked > 50);  // the stream does send, and masking changes u
    const std::vector<float> got = Values(*copies[0].params[0]);
    int64_t unlike_unmasked = 0;
    for (int64_t i = 0; i < kElements; ++i) {
      REQUIRE(got[i] == doctest::Approx(expected[i]).epsilon(1e-5));
      if (std::fabs(got[i] - unmasked[i]) > 1e-4f) ++unlike_unmasked;
    }
    CHECK(unlike_unmasked > kElements / 4);
    for (int r = 1; r < kWorkers; ++r) REQUIRE(SameBits(copies[0], copies[r]));
  }
}

TEST_CASE("a bad compressed message from a peer is an error naming it, on the receiver") {
  const Config config = CompressedConfig();
  auto ring = MakeRing(2);
  Copy copy = MakeCopy(config);
  FillGradients(copy, 0, 0);
  // Worker 1 sends: a size larger than what follows; then a well-framed
  // message the codec refuses (format 9).
  const std::vector<std::vector<uint8_t>> bad = {
      {0xe8, 0x03, 0, 0, 1, 1, 0},
      {16, 0, 0, 0, 9, 1, 0, 0, 0x8b, 0x13, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0}};
  const char* expected[] = {"worker 1's message for fc1.weight claims 1000 bytes",
                            "worker 1's message for fc1.weight"};
  for (size_t k = 0; k < bad.size(); ++k) {
    CAPTURE(k);
    std::vector<std::vector<uint8_t>> ignored;
    const auto results = OnEveryRank(2, [&](int r) {
      if (r == 1) return ring->rank(1).AllGatherBytes(bad[k], &ignored);
      return copy.weights->ReduceAndApply(ring->rank(0));
    });
    REQUIRE(results[1].ok());
    REQUIRE_FALSE(results[0].ok());
    CHECK_MESSAGE(results[0].message().find(expected[k]) != std::string::npos,
                  results[0].message());
  }
}

// Steps [from, to) of every copy, on `ring`.
void Train(std::vector<Copy>& copies, LocalRing& ring, int from, int to) {
  RequireAllOk(OnEveryRank(static_cast<int>(copies.size()), [&](int r) -> Status {
    for (int s = from; s < to; ++s) {
      FillGradients(copies[r], r, s);
      PSTRAIN_RETURN_IF_ERROR(copies[r].weights->ReduceAndApply(ring.rank(r)));
    }
    return Status::OK();
  }));
}

TEST_CASE("a checkpoint keeps every worker's residuals: the resumed copies go on bit for bit") {
  const Config config = CompressedConfig();
  const int world = 2, saved_at = 40, end = 80;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("pstrain_arc_test_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  auto ring = MakeRing(world);
  std::vector<Copy> copies;
  for (int r = 0; r < world; ++r) copies.push_back(MakeCopy(config));
  Train(copies, *ring, 0, saved_at);
  RequireAllOk(OnEveryRank(world, [&](int r) {
    return copies[r].weights->GatherEncoderStates(ring->rank(r), saved_at);
  }));
  auto file = copies[0].weights->Save(dir, saved_at);
  REQUIRE_MESSAGE(file.ok(), file.status().message());
  // Momentum-corrected: each tensor's momentum is in the encoders' state,
  // the copies run sgd and keep no momentum slot.
  auto sections = ReadCheckpointFile(dir + "/" + *file);
  REQUIRE_MESSAGE(sections.ok(), sections.status().message());
  std::vector<std::string> names;
  for (const Section& section : *sections) names.push_back(section.name);
  CHECK(std::count(names.begin(), names.end(), "fc1.weight/value") == 1);
  CHECK(std::count(names.begin(), names.end(), "fc1.weight/momentum") == 0);
  CHECK(std::count(names.begin(), names.end(), "encoders/1") == 1);
  Train(copies, *ring, saved_at, end);

  auto ring2 = MakeRing(world);
  std::vector<Copy> resumed;
  for (int r = 0; r < world; ++r) resumed.push_back(MakeCopy(config));
  Status loaded = resumed[0].weights->Load(dir, saved_at);
  REQUIRE_MESSAGE(loaded.ok(), loaded.message());
  RequireAllOk(OnEveryRank(world, [&](int r) {
    return resumed[r].weights->BroadcastFromChief(ring2->rank(r), saved_at);
  }));
  Train(resumed, *ring2, saved_at, end);
  std::filesystem::remove_all(dir);
  for (int r = 0; r < world; ++r) REQUIRE(SameBits(copies[r], resumed[r]));
  CHECK(copies[0].weights->compression_counters().sent > 0);
}

TEST_CASE("random bytes from a peer never crash the receiver") {
  const Config config = CompressedConfig();
  auto ring = MakeRing(2);
  Copy copy = MakeCopy(config);
  uint32_t seed = 12345;
  auto next = [&seed] { return seed = seed * 1664525u + 1013904223u; };
  int refused = 0;
  for (int k = 0; k < 300; ++k) {
    // Garbage, or a well-framed start (a plausible size, a valid header's
    // first bytes) followed by garbage.
    std::vector<uint8_t> bytes(next() % 600);
    for (auto& b : bytes) b = static_cast<uint8_t>(next() >> 24);
    if (k % 2 == 1 && bytes.size() >= 8) {
      const uint32_t size = static_cast<uint32_t>(bytes.size() - 4);
      std::memcpy(bytes.data(), &size, 4);
      bytes[4] = 1 + k % 4 / 2;  // format 1 or 2
      bytes[5] = 1;              // version
    }
    FillGradients(copy, 0, k);
    std::vector<std::vector<uint8_t>> ignored;
    const auto results = OnEveryRank(2, [&](int r) {
      if (r == 1) return ring->rank(1).AllGatherBytes(bytes, &ignored);
      return copy.weights->ReduceAndApply(ring->rank(0));
    });
    REQUIRE(results[1].ok());
    if (!results[0].ok()) {
      ++refused;
      CHECK(results[0].message().find("worker 1's") != std::string::npos);
    }
  }
  CHECK(refused == 300);
}

TEST_CASE("parameter averaging: copies differ between averagings, identical right after one") {
  Config config;
  config.train.mode = UpdateMode::kAverage;
  config.train.average_every = 4;
  config.train.optimizer.type = OptimizerType::kMomentum;
  config.train.optimizer.lr = 0.1f;
  // Compression is for gradients: averaging sends weights and ignores it.
  config.train.compression.type = CompressionType::kThreshold;
  const int world = 2;
  auto ring = MakeRing(world);
  std::vector<Copy> copies;
  for (int r = 0; r < world; ++r) copies.push_back(MakeCopy(config));
  for (int s = 0; s < 12; ++s) {
    CAPTURE(s);
    const bool due = (s + 1) % 4 == 0;
    std::vector<std::vector<float>> local(world);  // each copy before averaging
    RequireAllOk(OnEveryRank(world, [&](int r) -> Status {
      FillGradients(copies[r], r, s);
      PSTRAIN_RETURN_IF_ERROR(copies[r].weights->ReduceAndApply(ring->rank(r), false, false));
      local[r] = Values(*copies[r].params[0]);
      return due ? copies[r].weights->AverageWeights(ring->rank(r)) : Status::OK();
    }));
    REQUIRE(SameBits(copies[0], copies[1]) == due);
    if (due) {
      for (int64_t i = 0; i < kSizes[0]; ++i)
        REQUIRE(copies[0].params[0]->value.data[i] == (local[0][i] + local[1][i]) * 0.5f);
    }
  }
  CHECK(copies[0].weights->compression_counters().messages == 0);
}

// Workers' copies of a batch_norm's weight and running mean (each worker's
// own statistic: 1+r, 2+r, 3+r).
struct StatCopies {
  std::vector<Copy> copies;
  std::vector<std::unique_ptr<Param>> stats;  // one per copy
};

StatCopies MakeStatCopies(const Config& config, int world, bool synced_each_step) {
  StatCopies out;
  for (int r = 0; r < world; ++r) {
    Copy copy;
    auto weight = std::make_unique<Param>();
    weight->name = "bn.weight";
    weight->value = Tensor({3});
    weight->grad = Tensor({3});
    auto stat = std::make_unique<Param>();
    stat->name = "bn.running_mean";
    stat->value = Tensor({3});
    stat->grad = Tensor({3});
    stat->trainable = false;
    stat->synced_each_step = synced_each_step;
    stat->value.data = {1.0f + r, 2.0f + r, 3.0f + r};
    auto weights = AllReducedWeights::Create(config, {weight.get(), stat.get()});
    REQUIRE_MESSAGE(weights.ok(), weights.status().message());
    copy.weights = std::move(*weights);
    copy.params.push_back(std::move(weight));
    out.stats.push_back(std::move(stat));
    out.copies.push_back(std::move(copy));
  }
  return out;
}

TEST_CASE(
    "a layer's statistics ride along: never reduced nor optimized, broadcast from the chief") {
  Config config;
  config.train.optimizer.type = OptimizerType::kMomentum;
  config.train.optimizer.lr = 0.1f;
  config.train.optimizer.weight_decay = 0.5f;  // would move a value with a zero gradient
  const int world = 2;
  auto ring = MakeRing(world);
  auto [copies, stats] = MakeStatCopies(config, world, false);
  RequireAllOk(OnEveryRank(world, [&](int r) -> Status {
    copies[r].params[0]->grad.data = {1.0f, 1.0f, 1.0f};
    stats[r]->grad.data = {5.0f, 5.0f, 5.0f};  // never used
    return copies[r].weights->ReduceAndApply(ring->rank(r), false, false);
  }));
  CHECK(stats[0]->value.data == FloatBuffer{1.0f, 2.0f, 3.0f});
  CHECK(stats[1]->value.data == FloatBuffer{2.0f, 3.0f, 4.0f});
  CHECK(copies[0].params[0]->value.data[0] == doctest::Approx(-0.1));
  CHECK_FALSE(copies[0].weights->ReducesDense(stats[0].get()));
  // At a checkpoint or an epoch's end every worker takes the mean.
  RequireAllOk(OnEveryRank(
      world, [&](int r) { return copies[r].weights->AverageStatistics(ring->rank(r)); }));
  for (int r = 0; r < world; ++r) CHECK(stats[r]->value.data == FloatBuffer{1.5f, 2.5f, 3.5f});
  CHECK(copies[1].params[0]->value.data[0] == doctest::Approx(-0.1));  // the weights stay
  stats[1]->value.data = {7.0f, 8.0f, 9.0f};
  RequireAllOk(OnEveryRank(
      world, [&](int r) { return copies[r].weights->BroadcastFromChief(ring->rank(r), 1); }));
  CHECK(stats[1]->value.data == FloatBuffer{1.5f, 2.5f, 3.5f});
}

TEST_CASE("sync_stats: a layer's statistics are the workers' mean after every step") {
  for (UpdateMode mode : {UpdateMode::kSync, UpdateMode::kAverage}) {
    CAPTURE(static_cast<int>(mode));
    Config config;
    config.train.mode = mode;
    config.train.optimizer.lr = 0.1f;
    const int world = 3;
    auto ring = MakeRing(world);
    auto [copies, stats] = MakeStatCopies(config, world, true);
    RequireAllOk(OnEveryRank(world, [&](int r) -> Status {
      copies[r].params[0]->grad.data = {1.0f, 1.0f, 1.0f};
      return copies[r].weights->ReduceAndApply(ring->rank(r), false, false);
    }));
    for (int r = 0; r < world; ++r) CHECK(stats[r]->value.data == FloatBuffer{2.0f, 3.0f, 4.0f});
    // The gradient is still the mean's (in sync) or the worker's own.
    CHECK(copies[2].params[0]->value.data[0] == doctest::Approx(-0.1));
    CHECK(copies[0].weights->elements() == 3);  // the statistic is not a trained element
  }
}

}  // namespace
}  // namespace pstrain
