// A server's shard of a checkpoint: its partitions (values, optimizer state,
// clocks) as sections of a checkpoint file (src/common/checkpoint_file.h).
//
//   "meta"                     text: "server <rank>\nservers <n>\nworkers <w>\n"
//                              then "rows jump\n" (rows placed by jump hash;
//                              absent in older checkpoints: by modulo)
//   "p/<tensor>/<part>/state"  applied, clock (i64 each), optimizer steps (u64)
//   "p/<tensor>/<part>/values" float32 values
//   "p/<tensor>/<part>/slot/<name>"  float32 optimizer slot
//   "t/<table>"                the server's share of an embedding table: its
//                              clock (i64), then SparseTable::Serialize's bytes
//   "tiered/<table>"           the same for a table with rows on disk: clock,
//                              then TieredTable::Serialize's bytes
//   "store"                    with such tables: the files of the store's
//                              checkpoint, server-<rank>-store/ beside this
//                              file (roles/checkpoint/store.h)
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "roles/checkpoint/step_files.h"
#include "roles/checkpoint/store.h"
#include "src/common/status.h"

namespace pstrain {

struct ShardMeta {
  int server = 0;
  int servers = 0;
  int workers = 0;
};

// What a checkpoint holds of one partition.
struct PartitionSnapshot {
  std::string tensor;
  uint32_t part = 0;
  int64_t applied = 0;  // updates applied
  int64_t clock = 0;    // PsPartition::clock() (ssp: the slowest worker's pushes)
  uint64_t optimizer_steps = 0;
  std::vector<float> values;
  std::vector<std::pair<std::string, std::vector<float>>> slots;  // optimizer state
};

struct TableSnapshot {
  std::string name;
  int64_t clock = 0;
  bool tiered = false;  // rows partly on disk: TieredTable's bytes
  std::string bytes;    // SparseTable::Serialize or TieredTable::Serialize
};

struct ShardContents {
  int workers = 0;  // the worker count of the job that wrote it
  // Written before rows were placed by jump hash (comm/ps/row_placement.h):
  // its tables' rows are not where this version looks for them.
  bool rows_by_modulo = false;
  std::vector<PartitionSnapshot> partitions;
  std::vector<TableSnapshot> tables;
  bool has_store = false;  // a "store" section: the files below
  std::vector<StoreFile> store_files;
};

// `store_files`, when not null, lists the store checkpoint beside the file.
Status WriteShardFile(const std::string& path, const ShardMeta& meta,
                      const std::vector<PartitionSnapshot>& partitions,
                      const std::vector<TableSnapshot>& tables = {},
                      const std::vector<StoreFile>* store_files = nullptr);
// Reads a shard and checks it was written by a job of the same shape.
StatusOr<ShardContents> ReadShardFile(const std::string& path, const ShardMeta& expected);

}  // namespace pstrain
