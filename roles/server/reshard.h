// Resuming a checkpoint written by another number of servers. A tensor's
// partitions are cut by train.partition_bytes alone (comm/ps/partition_map.h),
// so the same partitions exist whatever the server count; only which server
// holds each changes. A server of the new job reads every shard file of the
// step and keeps the partitions the new map gives it, with their optimizer
// state and clocks. The workers need nothing: they pull what the servers
// hold.
//
// Server-held embedding tables move row by row: a row lives on the server
// its id hashes to (comm/ps/row_placement.h), so each server keeps, from
// every shard's share of a table, the rows and pending sightings that hash
// to it now (SparseTable::Gather). Rows kept on disk (server_cache_rows or
// server_cache_bytes) are not moved yet: such a checkpoint is refused with
// the count it needs.
#pragma once

#include <string>

#include "roles/checkpoint/shard_file.h"
#include "src/common/checkpoint_file.h"
#include "src/common/config/config.h"
#include "src/common/status.h"

namespace pstrain {

// How many servers wrote `checkpoint`: its MANIFEST lists server-0.ckpt ..
// server-<n-1>.ckpt (ShardFileName), n >= 1, none missing; else
// InvalidArgument naming what the list holds.
StatusOr<int> ServersOf(const CheckpointRef& checkpoint);

// The partitions server `rank` of `servers` holds in the job `config`
// describes, gathered from `checkpoint`, written by `written_by` servers.
// Errors name the file and the partition: a partition the new map needs
// that no shard holds, or holds at another size (train.partition_bytes
// changed), and a table with rows on disk.
StatusOr<ShardContents> GatherReshardedShard(const CheckpointRef& checkpoint, int written_by,
                                             const Config& config, int rank, int servers,
                                             int workers);

}  // namespace pstrain
