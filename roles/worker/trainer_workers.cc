// Where a worker's data goes (DataRun), and a live change of an elastic
// job's workers on each worker (the scheduler's side and the order of it:
// roles/scheduler/live_workers.cc). At the change's step S:
//   1. every worker of today enters a barrier: nothing of theirs is in
//      flight, and every server has applied step S - 1;
//   2. each drops its ring, and the chief tells the scheduler, which has the
//      servers renumber their workers, admits the joiners, sends the leavers
//      off and every worker the topology of the new shape (with its new
//      rank) before it answers;
//   3. a leaver stops there; the others and the joiners meet in a barrier
//      where the chief hands out its tensors and its place in the data
//      (roles/worker/join_offer.h);
//   4. the new ring is made, and the chief broadcasts the all-reduced
//      weights and their optimizer state over it (a joiner pulls the PS
//      weights from the servers, roles/worker/trainer.cc InitWeights);
//   5. every worker splits the rest of the epoch anew from the chief's
//      place, as a resume with another worker count does
//      (roles/checkpoint/worker_place.h, PlanEpochs): no sample is trained
//      twice or skipped. A lost worker's batches that it never pushed (an
//      async or ssp job, roles/scheduler/lost_worker.cc) go first.
#include <fmt/format.h>

#include <chrono>

#include "comm/ps/sparse_client.h"
#include "roles/worker/data_run.h"
#include "roles/worker/join_offer.h"
#include "roles/worker/remote_embeddings.h"
#include "roles/worker/trainer.h"
#include "src/data/batcher.h"
#include "src/data/dataset.h"

namespace pstrain {

StatusOr<DataRun> TrainJob::MakeDataRun(WorkerContext& ctx,
                                        const std::shared_ptr<const Dataset>& data, int64_t step) {
  const int batch_size = config_.train.batch_size;
  // An elastic job's worker count changes within epochs: it keeps every tail.
  const bool keep_tail = config_.train.elastic.has_value();
  Batcher plain = Batcher::ForTraining(&*data, batch_size, ctx.rank, ctx.workers,
                                       config_.train.seed, config_.data.shuffle, keep_tail);
  plain.RecordSampleIds(!ctx.sample_log.empty());
  int64_t steps_per_epoch = plain.StepsPerEpoch();
  if (data->sharded_by_file) {
    // Each worker reads its own files: agree on the shortest epoch, or sync
    // mode would wait forever for a worker that has run out of data.
    auto agreed = ctx.cluster->AgreeMin(BarrierGroup::kWorkers, steps_per_epoch);
    if (!agreed.ok()) return agreed.status();
    steps_per_epoch = *agreed;
    plain.CapStepsPerEpoch(steps_per_epoch);
  }
  if (steps_per_epoch <= 0)
    return FailedPrecondition(
        fmt::format("{} training samples on worker {} make no batch of {} (times {} workers)",
                    data->size(), ctx.rank, batch_size, ctx.workers));
  DataRun run;
  // A reader thread gathers the next batches while this one trains.
  run.batcher = std::make_unique<PrefetchingBatcher>(std::move(plain));
  run.plan.first_left = run.plan.steps_per_epoch = steps_per_epoch;
  run.start = step;
  run.total =
      config_.train.steps > 0 ? config_.train.steps : run.plan.TotalSteps(config_.train.epochs);
  return run;
}

Status TrainJob::ContinueFrom(WorkerContext& ctx, const Dataset& data, const WorkerPlace& from,
                              bool live, DataRun* run) {
  // A checkpoint's or the chief's: the positions it names must be this
  // data's.
  PSTRAIN_RETURN_IF_ERROR(from.Rest()
                              .Check(data.sharded_by_file ? -1 : data.size())
                              .WithContext(fmt::format("going on from step {}", from.step)));
  const WorkerPlace now = PlaceAt(ctx, run->start, run->plan);
  const bool keep_tail = config_.train.elastic.has_value();
  run->plan = PlanEpochs(from, now, data.size(), data.sharded_by_file, [&](int64_t left) {
    return Batcher::StepsFor(left, config_.train.batch_size, ctx.workers, keep_tail);
  });
  if (from.workers != ctx.workers)
    ctx.log->info("worker {}: {}", ctx.rank, DescribeReshard(from, now, run->plan, live));
  run->total =
      config_.train.steps > 0 ? config_.train.steps : run->plan.TotalSteps(config_.train.epochs);
  return Status::OK();
}

StatusOr<bool> TrainJob::ChangeWorkers(WorkerContext& ctx, int64_t step,
                                       const ClusterClient::WorkersChange& change,
                                       const std::shared_ptr<const Dataset>& data, DataRun* run) {
  const auto begin = std::chrono::steady_clock::now();
  auto where = [&](const std::string& what) {
    return fmt::format("going on with {} workers at step {}: {}", change.workers, step, what);
  };
  if (ctx.rank >= static_cast<int>(change.ranks.size()))
    return InvalidArgument(where("the change names no rank for this worker"));
  // A worker past the step (its hold timed out) cannot join the others'
  // barrier there; a worker whose samples depend on its rank cannot split
  // the epoch as the others do (the scheduler takes neither live).
  if (step != change.at_step)
    return FailedPrecondition(where(fmt::format("this worker is at step {}", step)));
  if (data->sharded_by_file)
    return FailedPrecondition(where("this worker's training set is split by file"));
  const int was = ctx.rank;
  const int rank = change.ranks[static_cast<size_t>(was)];
  const bool ring = !allreduced_->empty();
  // 1. Where the data is today, which the chief hands out in 3, with what
  // a lost worker never pushed put back.
  auto place = PlaceWithLostBatches(ctx, step, run->plan);
  if (!place.ok()) return place.status().WithContext(where(""));
  if (embeddings_)
    PSTRAIN_RETURN_IF_ERROR(embeddings_->FinishPrefetch().WithContext(where("pulling rows ahead")));
  ctx.cluster->EnterWorkersChange();
  PSTRAIN_RETURN_IF_ERROR(
      ctx.cluster->Barrier(BarrierGroup::kWorkers).WithContext(where("waiting for the workers")));
  // 2. Every neighbour is past its last collective of today's ring.
  if (ring && rank >= 0) PSTRAIN_RETURN_IF_ERROR(ctx.drop_ring().WithContext(where("the ring")));
  if (was == ChiefRank(ctx))
    PSTRAIN_RETURN_IF_ERROR(ctx.cluster->ReportWorkersAt(step, change.workers)
                                .WithContext(where("the scheduler's change")));
  if (rank < 0) {
    ctx.cluster->LeftLive();
    return false;
  }
  ctx.cluster->ForgetLostWorkers();  // their ranks are others' from here
  // 3. The new shape (the cluster client takes this worker's rank with the
  // new topology: AwaitRank below).
  ctx.rank = rank;
  ctx.workers = change.workers;
  if (ctx.kv != nullptr) ctx.kv->UseWorkerRank(rank);
  if (sparse_) sparse_->UseWorkerRank(rank);
  if (embeddings_) embeddings_->UseWorkerRank(rank);
  const std::vector<TensorSpec> tensors = PsTensors();
  auto offer = ctx.cluster->ShareFromOne(BarrierGroup::kWorkers,
                                         rank == 0 ? JoinOffer(tensors, *place) : std::string());
  if (!offer.ok()) return offer.status().WithContext(where("meeting the joiners"));
  auto chiefs = TakeJoinOffer(*offer, tensors, rank);
  if (!chiefs.ok()) return chiefs.status();
  // Sent before this barrier's answer, unless a large job's lists queue.
  PSTRAIN_RETURN_IF_ERROR(ctx.cluster->AwaitRank(rank, change.workers).WithContext(where("")));
  // 4. The new ring; the joiners take the all-reduced weights from it.
  if (ring) {
    auto collective = ctx.connect_ring();
    if (!collective.ok()) return collective.status().WithContext(where("the new ring"));
    ctx.collective = *collective;
    PSTRAIN_RETURN_IF_ERROR(allreduced_->BroadcastFromChief(*ctx.collective, step));
  }
  // 5. The rest of the epoch, split among the new set.
  auto remade = MakeDataRun(ctx, data, step);
  if (!remade.ok()) return remade.status();
  PSTRAIN_RETURN_IF_ERROR(ContinueFrom(ctx, *data, *chiefs, /*live=*/true, &*remade));
  *run = std::move(*remade);
  total_steps_ = run->total;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  ctx.log->info(
      "worker {} goes on as rank {} of {} workers from step {} (ring and data plan "
      "rebuilt in {:.0f} ms; the job now ends at step {})",
      was, rank, change.workers, step, ms, run->total);
  return true;
}

}  // namespace pstrain
