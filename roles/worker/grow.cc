#include "roles/worker/grow.h"

#include <fmt/format.h>

#include <chrono>
#include <vector>

#include "comm/ps/kv_client.h"
#include "roles/node/cluster_client.h"

namespace pstrain {

Status GrowServers(WorkerContext& ctx, int64_t step, int servers) {
  const auto begin = std::chrono::steady_clock::now();
  auto where = [&](const char* what) {
    return fmt::format("growing to {} servers at step {}: {}", servers, step, what);
  };
  if (!ctx.connect_servers || ctx.kv == nullptr)
    return FailedPrecondition(where("this worker cannot connect to more servers"));
  PSTRAIN_RETURN_IF_ERROR(ctx.connect_servers(servers).WithContext(where("connecting")));
  PSTRAIN_RETURN_IF_ERROR(
      ctx.cluster->Barrier(BarrierGroup::kWorkers).WithContext(where("waiting for the workers")));
  std::vector<TensorSpec> tensors = ctx.kv->map().tensors();
  auto placement =
      PartitionMap::Build(std::move(tensors), servers, ctx.config->train.partition_bytes);
  if (!placement.ok()) return placement.status().WithContext(where("the new placement"));
  // Versions only grow: a later growth starts at a later step.
  const int64_t version = step + 1;
  int moved = 0;
  int64_t bytes = 0;
  if (ctx.rank == 0) {
    std::vector<KvHandle> moves;
    const PartitionMap& now = ctx.kv->map();
    for (int t = 0; t < static_cast<int>(placement->tensors().size()); ++t)
      for (const Partition& p : placement->partitions(t)) {
        if (p.server == now.partitions(t)[p.part].server) continue;
        moves.push_back(ctx.kv->MovePartition(t, p.part, p.server, version));
        ++moved;
        bytes += p.elements * static_cast<int64_t>(sizeof(float));
      }
    for (const KvHandle& m : moves) PSTRAIN_RETURN_IF_ERROR(m.Wait().WithContext(where("moving")));
  }
  PSTRAIN_RETURN_IF_ERROR(
      ctx.cluster->Barrier(BarrierGroup::kWorkers).WithContext(where("waiting for the moves")));
  PSTRAIN_RETURN_IF_ERROR(ctx.kv->UsePlacement(*placement, version).WithContext(where("routing")));
  if (ctx.rank == 0) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    ctx.log->info(
        "the job runs with {} servers from step {}: {} partitions ({} bytes of values) moved "
        "live in {:.0f} ms",
        servers, step, moved, bytes, ms);
    PSTRAIN_RETURN_IF_ERROR(ctx.cluster->ReportShapeChanged(step, servers, moved));
  }
  return Status::OK();
}

}  // namespace pstrain
