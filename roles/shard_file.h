// A server's shard of a checkpoint: its partitions (values, optimizer state,
// clocks) as sections of a checkpoint file (src/common/checkpoint_file.h).
//
//   "meta"                     text: "server <rank>\nservers <n>\nworkers <w>\n"
//   "p/<tensor>/<part>/state"  applied, clock (i64 each), optimizer steps (u64)
//   "p/<tensor>/<part>/values" float32 values
//   "p/<tensor>/<part>/slot/<name>"  float32 optimizer slot
#pragma once

#include <string>
#include <vector>

#include "roles/ps_shard.h"
#include "src/common/status.h"

namespace pstrain {

struct ShardMeta {
  int server = 0;
  int servers = 0;
  int workers = 0;
};

// The file name of server `rank`'s shard within a step's directory.
std::string ShardFileName(int rank);

Status WriteShardFile(const std::string& path, const ShardMeta& meta,
                      const std::vector<PartitionSnapshot>& partitions);
// Reads a shard and checks it was written by a job of the same shape.
StatusOr<std::vector<PartitionSnapshot>> ReadShardFile(const std::string& path,
                                                       const ShardMeta& expected);

}  // namespace pstrain
