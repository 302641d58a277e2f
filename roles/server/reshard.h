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
// to it now (SparseTable::Gather). Rows an old server kept on disk
// (server_cache_rows, server_cache_bytes) are read from its store's
// checkpoint; the gathered rows pass through memory, and a server with a
// memory budget moves those past it to its own disk as it restores them.
#pragma once

#include <string>

#include "roles/checkpoint/shard_file.h"
#include "src/common/checkpoint_file.h"
#include "src/common/config/config.h"
#include "src/common/status.h"

namespace pstrain {

// How many servers wrote `checkpoint`: its MANIFEST lists server-0.ckpt ..
// server-<n-1>.ckpt (ShardFileName), none missing (0: a job without
// servers); else InvalidArgument naming the file missing.
StatusOr<int> ServersOf(const CheckpointRef& checkpoint);

// The partitions server `rank` of `servers` holds in the job `config`
// describes, gathered from `checkpoint`, written by `written_by` servers.
// Errors name the file and the partition: a partition the new map needs
// that no shard holds, or holds at another size (train.partition_bytes
// changed), and a share whose rows on disk cannot be read.
StatusOr<ShardContents> GatherReshardedShard(const CheckpointRef& checkpoint, int written_by,
                                             const Config& config, int rank, int servers,
                                             int workers);

}  // namespace pstrain
