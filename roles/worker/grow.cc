#include "roles/worker/grow.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "comm/ps/kv_client.h"
#include "comm/ps/sparse_client.h"
#include "roles/node/cluster_client.h"
#include "roles/placement/server_tables.h"
#include "roles/worker/remote_embeddings.h"
#include "roles/worker/rows_ahead.h"
#include "roles/worker/table_moves.h"

namespace pstrain {

Status ChangeServers(WorkerContext& ctx, int64_t step, int servers, const std::vector<int>& slots,
                     SparseClient* sparse, RemoteEmbeddings* embeddings) {
  const auto begin = std::chrono::steady_clock::now();
  auto where = [&](const char* what) {
    return fmt::format("going on with {} servers at step {}: {}", servers, step, what);
  };
  if (!ctx.use_servers || ctx.kv == nullptr)
    return FailedPrecondition(where("this worker cannot change its servers"));
  const int had = ctx.kv->servers();
  const bool grows = servers > had;
  // The scheduler's slots name servers this worker holds, each once.
  if (!slots.empty()) {
    std::vector<bool> named(static_cast<size_t>(had), false);
    bool fit = !grows && static_cast<int>(slots.size()) == servers;
    for (int from : slots) {
      fit = fit && from >= 0 && from < had && !named[static_cast<size_t>(from)];
      if (fit) named[static_cast<size_t>(from)] = true;
    }
    if (!fit)
      return InvalidArgument(where(
          fmt::format("the scheduler's slots {} do not fit {} servers", fmt::join(slots, ","), had)
              .c_str()));
  }
  // Rows pulled ahead come from the old placement, before anything moves.
  if (embeddings)
    PSTRAIN_RETURN_IF_ERROR(embeddings->FinishPrefetch().WithContext(where("pulling rows ahead")));
  if (grows) PSTRAIN_RETURN_IF_ERROR(ctx.use_servers(servers, {}).WithContext(where("connecting")));
  PSTRAIN_RETURN_IF_ERROR(
      ctx.cluster->Barrier(BarrierGroup::kWorkers).WithContext(where("waiting for the workers")));
  std::vector<TensorSpec> tensors = ctx.kv->map().tensors();
  auto placement =
      PartitionMap::Build(std::move(tensors), servers, ctx.config->train.partition_bytes);
  if (!placement.ok()) return placement.status().WithContext(where("the new placement"));
  // Versions only grow: a later growth starts at a later step.
  const int64_t version = step + 1;
  const int64_t moved_before = ctx.kv->moved().partitions, bytes_before = ctx.kv->moved().bytes;
  if (ctx.rank == 0) {
    // Each to its server in the new placement (the server holding that
    // rank today: `slots` names it); where it is already, the move is none.
    std::vector<KvHandle> moves;
    for (int t = 0; t < static_cast<int>(placement->tensors().size()); ++t)
      for (const Partition& p : placement->partitions(t))
        moves.push_back(
            ctx.kv->MovePartition(t, p.part, slots.empty() ? p.server : slots[p.server], version));
    for (const KvHandle& m : moves) PSTRAIN_RETURN_IF_ERROR(m.Wait().WithContext(where("moving")));
  }
  RowMoves rows;
  auto tables = ServerTables(*ctx.config);
  // Servers that take another rank are told so with the rows, tables or not.
  if (ctx.rank == 0 && ((tables.ok() && !tables->empty()) || !slots.empty())) {
    // What was copied ahead for this change (roles/worker/rows_ahead.h)
    // need not move again, but for what changed since.
    const bool ahead = ctx.rows_ahead && ctx.rows_ahead->TakeCopied(had, servers, slots);
    auto moved_rows = MoveTableRows(ctx.loop, ctx.servers, had, servers, slots, step,
                                    ahead ? RowsPhase::kDelta : RowsPhase::kWhole,
                                    std::getenv("PSTRAIN_TEST_CHECK_MOVES") != nullptr, ctx.log);
    if (!moved_rows.ok()) return moved_rows.status().WithContext(where("moving table rows"));
    rows = *moved_rows;
  }
  const int moved = static_cast<int>(ctx.kv->moved().partitions - moved_before);
  const int64_t bytes = ctx.kv->moved().bytes - bytes_before;
  PSTRAIN_RETURN_IF_ERROR(
      ctx.cluster->Barrier(BarrierGroup::kWorkers).WithContext(where("waiting for the moves")));
  PSTRAIN_RETURN_IF_ERROR(ctx.kv->UsePlacement(*placement, version).WithContext(where("routing")));
  if (!grows)
    PSTRAIN_RETURN_IF_ERROR(ctx.use_servers(servers, slots).WithContext(where("disconnecting")));
  if (sparse) sparse->UseServers(ctx.servers);
  if (embeddings) embeddings->UseServers(ctx.servers);
  if (ctx.rank == 0) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    ctx.log->info(
        "the job runs with {} servers from step {}: {} partitions ({} bytes of values) and {} "
        "table rows ({} bytes) moved live in {:.0f} ms",
        servers, step, moved, bytes, rows.rows, rows.bytes, ms);
    PSTRAIN_RETURN_IF_ERROR(ctx.cluster->ReportShapeChanged(step, servers, moved));
  }
  return Status::OK();
}

}  // namespace pstrain
