// A lost worker's batches that it never pushed (an async or ssp job that
// drops it live, roles/scheduler/lost_worker.cc) are made up by the others
// first: src/common/epoch_rest.h, WithUntrainedBatches and PlanEpochs in
// roles/checkpoint/worker_place.h. Every sample of the epoch is trained
// once, whatever the losses, and the place with its rest survives a
// checkpoint's text.
#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "roles/checkpoint/worker_place.h"
#include "src/data/batcher.h"
#include "tests/numbered_data.h"

namespace pstrain {
namespace {

constexpr int kBatch = 8;
constexpr uint64_t kSeed = 7;

// Samples seen, counted, and the batches of one rank left out (the lost).
struct Epoch {
  const Dataset& data;
  std::map<int64_t, int> used;

  // `workers` workers of an elastic job (keep_tail) train `steps` steps of
  // epoch 1 from `position` of `rest`; rank `skip_rank`'s batches at steps
  // [skip_from, steps) are not trained.
  void Train(int workers, int64_t position, const EpochRest& rest, int64_t steps,
             int skip_rank = -1, int64_t skip_from = 0) {
    for (int r = 0; r < workers; ++r) {
      Batcher b = Batcher::ForTraining(&data, kBatch, r, workers, kSeed, true, /*keep_tail=*/true);
      b.StartEpoch(1, position, rest);
      Batch batch;
      for (int64_t s = 0; s < steps && b.Next(&batch); ++s) {
        if (r == skip_rank && s >= skip_from) continue;
        for (int64_t i = 0; i < batch.size(); ++i)
          ++used[static_cast<int64_t>(batch.dense.data[static_cast<size_t>(i)])];
      }
    }
  }
  // Every sample of the data set once.
  void CheckOnce() const {
    CHECK(static_cast<int64_t>(used.size()) == data.size());
    int twice = 0;
    for (const auto& [sample, times] : used) twice += times != 1;
    CHECK(twice == 0);
  }
};

WorkerPlace PlaceOf(int workers, int64_t n, int64_t step, int64_t position) {
  WorkerPlace p;
  p.workers = workers;
  p.batch_size = kBatch;
  p.seed = kSeed;
  p.shuffle = true;
  p.steps_per_epoch = Batcher::StepsFor(n, kBatch, workers, true);
  p.epoch = 1;
  p.step = step;
  p.position = position;
  p.epoch_start = step - position;
  p.lr_schedule = "none";
  return p;
}

int64_t StepsOf(const EpochPlan& plan, int64_t n, int workers) {
  return plan.first_left > 0 ? plan.first_left : Batcher::StepsFor(n, kBatch, workers, true);
}

TEST_CASE("epoch rest: slices walk the positions to make up, then the rest") {
  const EpochRest rest{{{10, 14}, {2, 4}}, 20};
  CHECK(rest.Size(30) == 16);
  CHECK(rest.Slice(0, 16, 30) == std::vector<PositionRange>{{10, 14}, {2, 4}, {20, 30}});
  CHECK(rest.Slice(3, 8, 30) == std::vector<PositionRange>{{13, 14}, {2, 4}, {20, 22}});
  const EpochRest after = rest.After(5, 30);
  CHECK(after.make_up == std::vector<PositionRange>{{3, 4}});
  CHECK(after.skip == 20);
  CHECK(rest.After(9, 30).make_up.empty());
  CHECK(rest.After(9, 30).skip == 23);
  CHECK(rest.Check(30).ok());
  CHECK_FALSE((EpochRest{{{10, 14}, {12, 16}}, 20}).Check().ok());  // overlap
  CHECK_FALSE((EpochRest{{{10, 24}}, 20}).Check().ok());            // not trained yet
  CHECK_FALSE((EpochRest{{}, 40}).Check(30).ok());
  auto text = ParsePositionRanges(PositionRangesText(rest.make_up));
  REQUIRE(text.ok());
  CHECK(*text == rest.make_up);
  for (const char* bad : {"1", "1-", "3-2", "-1-2", "1-2,", "1-2,x", "1-2;3-4"})
    CHECK_MESSAGE(!ParsePositionRanges(bad).ok(), bad);
  CHECK(ParsePositionRanges("")->empty());
}

TEST_CASE("a lost worker's untrained batches are made up first: every sample once") {
  const int64_t n = 1000;
  const Dataset data = testing::NumberedDataset(n);
  // 3 workers, 41 steps per epoch. Worker 2 pushed its last at step 6 of
  // the epoch; the others went on to step 10, where it is dropped.
  for (int lost : {0, 2}) {
    INFO("lost worker " << lost);
    Epoch epoch{data, {}};
    epoch.Train(3, 0, {}, 10, lost, 7);
    const WorkerPlace at = PlaceOf(3, n, /*step=*/50, /*position=*/10);
    auto place = WithUntrainedBatches(at, {lost}, /*from=*/47, n);
    REQUIRE_MESSAGE(place.ok(), place.status().message());
    CHECK(place->position == 0);
    CHECK(place->epoch_start == 50);
    CHECK(place->Rest().MakeUpSize() == 3 * kBatch);
    CHECK(place->Rest().Check(n).ok());
    // 2 go on from there: the made-up batches first, the tail kept.
    const WorkerPlace now = PlaceOf(2, n, 50, 0);
    const EpochPlan plan = PlanEpochs(*place, now, n, false, [](int64_t left) {
      return Batcher::StepsFor(left, kBatch, 2, true);
    });
    CHECK(plan.first_epoch == 1);
    CHECK(plan.RestAt(50).make_up == place->make_up);
    epoch.Train(2, 0, plan.RestAt(50), StepsOf(plan, n, 2));
    epoch.CheckOnce();
  }
}

TEST_CASE("losses one after another in an epoch, and a checkpoint between them") {
  const int64_t n = 1000;
  const Dataset data = testing::NumberedDataset(n);
  Epoch epoch{data, {}};
  auto steps_for = [](int workers) {
    return [workers](int64_t left) { return Batcher::StepsFor(left, kBatch, workers, true); };
  };
  // 4 workers: worker 1 stops pushing after step 3; dropped at step 6.
  epoch.Train(4, 0, {}, 6, 1, 3);
  auto first = WithUntrainedBatches(PlaceOf(4, n, 6, 6), {1}, 3, n);
  REQUIRE(first.ok());
  EpochPlan plan = PlanEpochs(*first, PlaceOf(3, n, 6, 0), n, false, steps_for(3));
  // 3 workers train 5 steps of it (the made-up batches and more), then a
  // checkpoint; resumed with 3 workers, worker 0 stops pushing after 2 more
  // steps and is dropped 2 steps later.
  epoch.Train(3, 0, plan.RestAt(6), 5);
  WorkerPlace saved = PlaceOf(3, n, 11, plan.InEpoch(11));
  saved.skip_samples = plan.SkipAt(11);
  saved.make_up = plan.RestAt(11).make_up;
  auto read = ParseWorkerPlace(WorkerPlaceText(saved), "worker-0.ckpt");
  REQUIRE_MESSAGE(read.ok(), read.status().message());
  CHECK(read->make_up == saved.make_up);
  CHECK(read->skip_samples == saved.skip_samples);
  plan = PlanEpochs(*read, PlaceOf(3, n, 11, plan.InEpoch(11)), n, false, steps_for(3));
  CHECK(plan.first_done == 5);
  epoch.Train(3, plan.first_done, plan.RestAt(11), 4, 0, 2);
  WorkerPlace at = PlaceOf(3, n, 15, plan.InEpoch(15));
  at.skip_samples = plan.SkipAt(15);
  at.make_up = plan.RestAt(15).make_up;
  auto second = WithUntrainedBatches(at, {0}, 13, n);
  REQUIRE(second.ok());
  plan = PlanEpochs(*second, PlaceOf(2, n, 15, 0), n, false, steps_for(2));
  epoch.Train(2, 0, plan.RestAt(15), StepsOf(plan, n, 2));
  epoch.CheckOnce();
}

TEST_CASE("batches of an earlier epoch cannot be made up, and bad ranks are refused") {
  const int64_t n = 1000;
  const WorkerPlace at = PlaceOf(3, n, 45, 4);  // epoch 1 began at step 41
  auto early = WithUntrainedBatches(at, {2}, 39, n);
  CHECK(early.status().code() == StatusCode::kFailedPrecondition);
  CHECK(early.status().message().find("epoch before") != std::string::npos);
  CHECK(WithUntrainedBatches(at, {2}, 41, n).ok());
  CHECK_FALSE(WithUntrainedBatches(at, {3}, 43, n).ok());
  CHECK_FALSE(WithUntrainedBatches(at, {1}, 46, n).ok());
  // Nothing to make up: the place is the same rest, from step 45.
  auto none = WithUntrainedBatches(at, {1}, 45, n);
  REQUIRE(none.ok());
  CHECK(none->make_up.empty());
  CHECK(none->skip_samples == 4 * 3 * kBatch);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

// The schedule a checkpoint records (WorkerPlace::lr_schedule): a resume
// compares it, so the text of an existing config never changes.
TEST_CASE("the lr schedule text: unchanged for step decay and constant lr, new ones named") {
  Config config;
  config.train.optimizer.type = OptimizerType::kSgd;
  config.train.optimizer.lr = 0.05f;
  CHECK(LrScheduleText(config, {"w", "b"}) == "none (constant lr) lr 0.05 constant: w,b");
  config.train.optimizer.lr_decay_steps = 2340;
  config.train.optimizer.lr_decay = 0.1f;
  CHECK(LrScheduleText(config, {"w"}) == "lr 0.05 x0.1 every 2340 updates: w");
  config.train.optimizer.lr_decay_steps = 0;
  config.train.optimizer.warmup_steps = 500;
  config.train.optimizer.cosine_steps = 9000;
  CHECK(LrScheduleText(config, {"w"}) ==
        "lr 0.05 after a warm-up of 500 updates, cosine to 0 over 9000 updates: w");
  config.train.optimizer.cosine_steps = 0;
  CHECK(LrScheduleText(config, {"w"}) == "lr 0.05 after a warm-up of 500 updates, constant: w");
}

}  // namespace
}  // namespace pstrain
