// A server's shard of a checkpoint: its partitions (values, optimizer state,
// clocks) as sections of a checkpoint file (src/common/checkpoint_file.h).
//
//   "meta"                     text: "server <rank>\nservers <n>\nworkers <w>\n"
//   "p/<tensor>/<part>/state"  applied, clock (i64 each), optimizer steps (u64)
//   "p/<tensor>/<part>/values" float32 values
//   "p/<tensor>/<part>/slot/<name>"  float32 optimizer slot
//   "t/<table>"                the server's share of an embedding table: its
//                              clock (i64), then SparseTable::Serialize's bytes
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

struct TableSnapshot {
  std::string name;
  int64_t clock = 0;
  std::string bytes;  // SparseTable::Serialize
};

struct ShardContents {
  int workers = 0;  // the worker count of the job that wrote it
  std::vector<PartitionSnapshot> partitions;
  std::vector<TableSnapshot> tables;
};

Status WriteShardFile(const std::string& path, const ShardMeta& meta,
                      const std::vector<PartitionSnapshot>& partitions,
                      const std::vector<TableSnapshot>& tables = {});
// Reads a shard and checks it was written by a job of the same shape.
StatusOr<ShardContents> ReadShardFile(const std::string& path, const ShardMeta& expected);

}  // namespace pstrain
