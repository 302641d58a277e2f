// Batches and metrics: epoch order across workers (2 x 32 is 1 x 64),
// evaluation batches, caps for file-sharded data, the prefetching reader,
// and accuracy / AUC / log loss on hand-checked examples.
#include "src/data/batcher.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "src/data/dataset.h"
#include "src/data/metrics.h"
#include "src/data/prefetcher.h"

namespace pstrain {
namespace {

Dataset Indexed(int n) {
  Dataset d;
  d.sample_shape = {1};
  d.fields = 2;
  for (int i = 0; i < n; ++i) {
    d.dense.push_back(static_cast<float>(i));
    d.labels.push_back(static_cast<float>(i));
    d.sparse.push_back(i);
    d.sparse.push_back(-i);
  }
  return d;
}

// The labels of every batch of one epoch.
std::vector<std::vector<float>> Epoch(Batcher* b, int epoch) {
  b->StartEpoch(epoch);
  std::vector<std::vector<float>> out;
  Batch batch;
  while (b->Next(&batch)) out.push_back(batch.labels);
  return out;
}

TEST_CASE("2 workers with batch 32 see what 1 worker with batch 64 sees, in order") {
  const Dataset data = Indexed(200);
  Batcher one(&data, 64, 0, 1, true, 42, true);
  Batcher w0(&data, 32, 0, 2, true, 42, true), w1(&data, 32, 1, 2, true, 42, true);
  CHECK(one.StepsPerEpoch() == 3);  // 200 / 64: the last 8 samples are dropped
  CHECK(w0.StepsPerEpoch() == 3);
  CHECK(w1.StepsPerEpoch() == 3);
  for (int epoch : {0, 1}) {
    auto big = Epoch(&one, epoch), a = Epoch(&w0, epoch), b = Epoch(&w1, epoch);
    REQUIRE(big.size() == 3);
    REQUIRE(a.size() == 3);
    REQUIRE(b.size() == 3);
    for (size_t k = 0; k < 3; ++k) {
      CHECK(a[k] == std::vector<float>(big[k].begin(), big[k].begin() + 32));
      CHECK(b[k] == std::vector<float>(big[k].begin() + 32, big[k].end()));
    }
  }
}

TEST_CASE("the epoch order is the same on every worker, new each epoch, and drops the tail") {
  const Dataset data = Indexed(200);
  Batcher a(&data, 64, 0, 1, true, 7, true), b(&data, 64, 0, 1, true, 7, true);
  Batcher other_seed(&data, 64, 0, 1, true, 8, true);
  const auto e0 = Epoch(&a, 0);
  CHECK(e0 == Epoch(&b, 0));
  CHECK(e0 != Epoch(&a, 1));
  CHECK(e0 != Epoch(&other_seed, 0));
  CHECK(e0 == Epoch(&a, 0));  // an epoch's order depends only on (seed, epoch)
  Batcher split = Batcher::ForTraining(&data, 32, 1, 2, 7, true);  // not sharded by file
  const auto half = Epoch(&split, 0);
  REQUIRE(half.size() == 3);
  CHECK(half[0] == std::vector<float>(e0[0].begin() + 32, e0[0].end()));
  std::set<float> seen;
  for (const auto& batch : e0) {
    CHECK(batch.size() == 64);
    seen.insert(batch.begin(), batch.end());
  }
  CHECK(seen.size() == 192);  // 3 full batches of distinct samples; 8 dropped

  Batch batch;
  a.StartEpoch(0);
  REQUIRE(a.Next(&batch));
  CHECK(batch.dense.shape == Shape{64, 1});
  CHECK(batch.fields == 2);
  for (int i = 0; i < 64; ++i) {  // every part of a sample travels together
    CHECK(batch.dense.data[i] == batch.labels[i]);
    CHECK(batch.sparse[2 * i] == static_cast<int64_t>(batch.labels[i]));
    CHECK(batch.sparse[2 * i + 1] == -static_cast<int64_t>(batch.labels[i]));
  }
}

// Every sample an epoch's workers train, by sample index, from `skip`
// permutation positions on, and the steps each took.
std::vector<int> Used(const Dataset& d, int batch, int workers, int epoch, int64_t skip,
                      std::vector<int64_t>* steps) {
  std::vector<int> used(static_cast<size_t>(d.size()), 0);
  for (int r = 0; r < workers; ++r) {
    Batcher b(&d, batch, r, workers, /*split_by_index=*/true, /*seed=*/9, /*shuffle=*/true,
              /*keep_last=*/false, /*keep_tail=*/true);
    b.RecordSampleIds(true);
    b.StartEpoch(epoch, 0, skip);
    Batch out;
    int64_t n = 0;
    while (b.Next(&out)) {
      REQUIRE(out.sample_ids.size() == out.labels.size());
      for (int64_t id : out.sample_ids) ++used[static_cast<size_t>(id)];
      ++n;
    }
    steps->push_back(n);
  }
  return used;
}

TEST_CASE("with keep_tail an epoch's workers train every sample once, in equal step counts") {
  // 103 samples, batch 8: 2 workers (16 a step), 3 (24), 5 (40), and after
  // skipping 40 positions (the 63 left: 2 steps of 24 and a tail of 15).
  const Dataset d = Indexed(103);
  for (auto [workers, skip] : {std::pair{2, 0}, {3, 0}, {5, 0}, {3, 40}, {4, 96}}) {
    CAPTURE(workers);
    CAPTURE(skip);
    std::vector<int64_t> steps;
    const std::vector<int> used = Used(d, 8, workers, 1, skip, &steps);
    // Every worker takes the same number of steps: sync mode waits for each.
    CHECK(std::set<int64_t>(steps.begin(), steps.end()).size() == 1);
    CHECK(steps[0] == Batcher::StepsFor(103 - skip, 8, workers, true));
    // The samples of the skipped positions are not trained again, the others once.
    Batcher order(&d, 1, 0, 1, true, 9, true);
    order.RecordSampleIds(true);
    order.StartEpoch(1);
    Batch one;
    for (int64_t pos = 0; order.Next(&one); ++pos)
      CHECK(used[static_cast<size_t>(one.sample_ids[0])] == (pos < skip ? 0 : 1));
  }
  // Fewer samples left than workers: those few are dropped, no step taken.
  CHECK(Batcher::StepsFor(3, 8, 4, true) == 0);
  CHECK(Batcher::StepsFor(4, 8, 4, true) == 1);
  CHECK(Batcher::StepsFor(103, 8, 2, false) == 6);
}

TEST_CASE("evaluation batches keep file order and the last, smaller batch") {
  const Dataset data = Indexed(200);
  Batcher eval = Batcher::ForEval(&data, 64);
  CHECK(eval.StepsPerEpoch() == 4);
  const auto batches = Epoch(&eval, 3);
  REQUIRE(batches.size() == 4);
  CHECK(batches[3].size() == 8);
  std::vector<float> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  CHECK(all == data.labels);
}

TEST_CASE("a file-sharded worker batches all its own samples and honours an agreed cap") {
  const Dataset data = Indexed(100);
  Dataset sharded = data;
  sharded.sharded_by_file = true;
  Batcher mine = Batcher::ForTraining(&sharded, 10, 1, 4, 5, true);
  CHECK(mine.Samples() == 100);
  CHECK(mine.StepsPerEpoch() == 10);
  std::set<float> seen;
  for (const auto& b : Epoch(&mine, 0)) seen.insert(b.begin(), b.end());
  CHECK(seen.size() == 100);
  mine.CapStepsPerEpoch(6);
  CHECK(mine.StepsPerEpoch() == 6);
  CHECK(Epoch(&mine, 1).size() == 6);
}

TEST_CASE("the prefetching batcher yields exactly the plain batcher's batches") {
  const Dataset data = Indexed(1000);
  Batcher plain(&data, 16, 1, 3, true, 9, true);
  PrefetchingBatcher fetched(Batcher(&data, 16, 1, 3, true, 9, true), 2);
  CHECK(fetched.StepsPerEpoch() == plain.StepsPerEpoch());
  Batch none;
  CHECK_FALSE(fetched.Next(&none));  // nothing before the first epoch
  for (int epoch : {0, 1, 2}) {
    plain.StartEpoch(epoch);
    fetched.StartEpoch(epoch);
    Batch a, b;
    int64_t steps = 0;
    while (plain.Next(&a)) {
      REQUIRE(fetched.Next(&b));
      CHECK(a.labels == b.labels);
      CHECK(a.dense.data == b.dense.data);
      CHECK(a.dense.shape == b.dense.shape);
      CHECK(a.sparse == b.sparse);
      ++steps;
      if (epoch == 1 && steps == 3) break;  // abandon an epoch midway
    }
    if (epoch != 1) CHECK_FALSE(fetched.Next(&b));
  }
}

TEST_CASE("the prefetching batcher can be destroyed mid-epoch or before any epoch") {
  const Dataset data = Indexed(5000);
  for (int taken : {0, 1, 5}) {
    PrefetchingBatcher fetched(Batcher(&data, 8, 0, 1, true, 1, true), 2);
    fetched.StartEpoch(0);
    Batch b;
    for (int i = 0; i < taken; ++i) REQUIRE(fetched.Next(&b));
  }  // the destructor returns (the CTest timeout catches a hang)
  PrefetchingBatcher idle(Batcher(&data, 8, 0, 1, true, 1, true));
}

// ---------------------------------------------------------------- Metrics

TEST_CASE("AUC on hand-checked examples") {
  CHECK(Auc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}) == 1.0);
  CHECK(Auc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}) == 0.0);
  CHECK(Auc({0.5f, 0.5f, 0.5f, 0.5f}, {0, 1, 0, 1}) == 0.5);
  CHECK(Auc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}) == 0.75);
  // Pairs (positive, negative): (.5,.5) ties = 1/2, the other three are won.
  CHECK(Auc({0.5f, 0.5f, 0.2f, 0.9f}, {1, 0, 0, 1}) == 0.875);
  CHECK(Auc({0.3f, 0.6f}, {1, 1}) == 0.5);  // one class only
  BinaryAccumulator acc;
  acc.Add({0.1f, 0.4f}, {0, 0});
  acc.Add({0.35f, 0.8f}, {1, 1});
  CHECK(acc.Auc() == 0.75);
  CHECK(acc.count() == 4);
}

TEST_CASE("the test metric of each loss: accuracy with top-5, AUC with log-loss, RMSE") {
  Tensor logits({2, 6});
  // Sample 0: label 2 ranks first; sample 1: label 0 ranks 5th (4 above).
  logits.data = {0.1f, 0.2f, 0.9f, 0.0f, 0.0f, 0.0f, 0.1f, 0.5f, 0.6f, 0.7f, 0.8f, 0.0f};
  TestMetric softmax(LossType::kSoftmaxCrossEntropy);
  softmax.Add(logits, {2, 0});
  CHECK(softmax.value() == doctest::Approx(0.5));
  CHECK(std::string(softmax.name()) == "accuracy");
  CHECK(softmax.Describe() == "test accuracy: 0.5000, top-5: 1.0000 (2 samples)");
  logits.data[11] = 0.2f;  // now 5 classes score above label 0
  TestMetric again(LossType::kSoftmaxCrossEntropy);
  again.Add(logits, {2, 0});
  CHECK(again.Describe() == "test accuracy: 0.5000, top-5: 0.5000 (2 samples)");

  Tensor outputs({3, 1});
  outputs.data = {1.0f, -2.0f, 0.0f};
  TestMetric rmse(LossType::kMse);
  rmse.Add(outputs, {0.0f, -1.0f, 1.0f});
  CHECK(rmse.value() == doctest::Approx(1.0));  // sqrt((1 + 1 + 1) / 3)
  CHECK_FALSE(rmse.higher_is_better());
  CHECK(rmse.Describe() == "test RMSE: 1.0000 (3 samples)");

  // A model that diverged is never right, nor a NaN ever ranked first.
  Tensor nan_logits({2, 3});
  nan_logits.data = {std::nanf(""), 0.0f, -1.0f, std::nanf(""), std::nanf(""), 1.0f};
  TestMetric diverged(LossType::kSoftmaxCrossEntropy);
  diverged.Add(nan_logits, {0, 2});
  CHECK(diverged.value() == doctest::Approx(0.5));

  TestMetric auc(LossType::kBceWithLogits);
  auc.Add(outputs, {1.0f, 0.0f, 0.0f});
  CHECK(auc.value() == doctest::Approx(1.0));
  CHECK(std::string(auc.name()) == "auc");
  CHECK(auc.Describe().find("test AUC: 1.0000, log-loss: ") == 0);
}

TEST_CASE("accuracy and log loss on hand-checked examples") {
  Tensor logits({3, 3});
  logits.data = {2, 1, 0, /**/ 0, 0, 5, /**/ 1, 3, 2};
  CHECK(Accuracy(logits, {0, 2, 0}) == doctest::Approx(2.0 / 3));
  AccuracyAccumulator acc;
  acc.Add(logits, {0, 2, 0});
  acc.Add(logits, {0, 2, 1});
  CHECK(acc.Value() == doctest::Approx(5.0 / 6));

  CHECK(LogLoss({0.5f, 0.5f}, {0, 1}) == doctest::Approx(std::log(2.0)));
  CHECK(LogLoss({0.9f}, {1}) == doctest::Approx(-std::log(0.9)));
  CHECK(LogLoss({0.9f}, {0}) == doctest::Approx(-std::log(0.1)));
  // A certain mistake is clipped to a finite loss.
  CHECK(LogLoss({0.0f}, {1}) == doctest::Approx(-std::log(kLogLossEps)));
  CHECK(LogLoss({1.0f}, {0}) == doctest::Approx(-std::log(kLogLossEps)).epsilon(1e-3));
}

// ---------------------------------------------------------------- Generator

}  // namespace
}  // namespace pstrain
