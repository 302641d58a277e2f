#include "roles/server/reshard.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "comm/ps/partition_map.h"
#include "comm/ps/row_placement.h"
#include "embedding/row_batch.h"
#include "embedding/row_store.h"
#include "embedding/sparse_table.h"
#include "embedding/tiered_table.h"
#include "roles/checkpoint/model_layout.h"
#include "roles/checkpoint/step_files.h"
#include "roles/placement/server_tables.h"

namespace pstrain {

namespace fs = std::filesystem;

StatusOr<int> ServersOf(const CheckpointRef& checkpoint) {
  int found = 0;
  for (const std::string& file : checkpoint.files)
    if (file.rfind("server-", 0) == 0 && file.size() > 12 &&
        file.compare(file.size() - 5, 5, ".ckpt") == 0)
      ++found;
  for (int s = 0; s < found; ++s) {
    bool listed = false;
    for (const std::string& file : checkpoint.files) listed |= file == ShardFileName(s);
    if (!listed)
      return InvalidArgument(fmt::format("{}: the MANIFEST lists {} server shard files but not {}",
                                         checkpoint.step_dir, found, ShardFileName(s)));
  }
  return found;
}

namespace {

// (tensor, part) -> elements, for the partitions `rank` of `servers` holds.
StatusOr<std::map<std::pair<std::string, uint32_t>, int64_t>> PartitionsOf(const Config& config,
                                                                           int rank, int servers) {
  auto layout = LayoutOf(config);
  if (!layout.ok()) return layout.status();
  std::vector<TensorSpec> tensors;
  for (const LayoutTensor& t : layout->tensors)
    if (t.place == WeightPlace::kServers) tensors.push_back({t.name, NumElements(t.shape)});
  std::map<std::pair<std::string, uint32_t>, int64_t> mine;
  if (tensors.empty()) return mine;
  auto map = PartitionMap::Build(tensors, servers, config.train.partition_bytes);
  if (!map.ok()) return map.status().WithContext("partition map");
  for (size_t t = 0; t < map->tensors().size(); ++t)
    for (const Partition& p : map->partitions(static_cast<int>(t)))
      if (p.server == rank) mine[{map->tensors()[t].name, p.part}] = p.elements;
  return mine;
}

// One shard's share of a table, and where its rows on disk are: the old
// server's store checkpoint beside its shard file (tiered tables only).
struct TableShare {
  TableSnapshot snapshot;
  std::string store_checkpoint;
};

// Every row of a share in one SparseTable: for a tiered table, the rows in
// memory (the snapshot's bytes) and those on disk, read from a copy of the
// old server's store checkpoint (RowStore::Restore links its files into a
// scratch directory, removed after). The rows pass through memory.
StatusOr<SparseTable> WholeShare(const EmbeddingTableOptions& options, const TableShare& share) {
  const std::string& bytes = share.snapshot.bytes;
  if (!share.snapshot.tiered) return SparseTable::Deserialize(options, bytes.data(), bytes.size());
  auto header = TieredTable::ReadSerializedHeader(options.name, bytes.data(), bytes.size());
  if (!header.ok()) return header.status();
  auto memory = SparseTable::Deserialize(options, bytes.data() + header->rows_at,
                                         bytes.size() - header->rows_at);
  if (!memory.ok() || header->disk_rows == 0) return memory;
  std::error_code ec;
  std::string scratch = (fs::temp_directory_path(ec) / "pstrain-reshard-XXXXXX").string();
  if (mkdtemp(scratch.data()) == nullptr)
    return Unavailable(fmt::format("cannot make a scratch directory {}", scratch));
  auto remove_scratch = [&] { fs::remove_all(scratch, ec); };
  auto store = RowStore::Restore(share.store_checkpoint, scratch + "/store");
  if (!store.ok()) {
    remove_scratch();
    return store.status();
  }
  const size_t floats =
      static_cast<size_t>(options.dim) * (1 + static_cast<size_t>(memory->optimizer().num_slots()));
  auto table = (*store)->OpenTable(options.name, floats, TieredTable::NeedsRecency(options),
                                   /*must_be_new=*/false);
  // A row read back into memory keeps its disk copy until its next spill
  // (embedding/tiered_table.h): the memory's is the row, the disk's stale.
  RowBatch rows(floats);
  Status read = table.status();
  if (read.ok()) {
    auto it = (*store)->NewIterator(*table);
    for (; it->Valid(); it->Next())
      if (!memory->Find(it->id()).has_value())
        rows.Add(it->id(), it->data(), it->last_touched(), it->updates());
    read = it->status();
  }
  store->reset();
  remove_scratch();
  if (!read.ok()) return read;
  if (static_cast<int64_t>(rows.size()) != header->disk_rows)
    return InvalidArgument(
        fmt::format("embedding table '{}': {} holds {} rows on disk alone, the table says {}",
                    options.name, share.store_checkpoint, rows.size(), header->disk_rows));
  memory->InsertRows(rows);
  return memory;
}

// Each table's rows that server `rank` of `servers` holds (ServerOfId),
// from every shard's share of it, all in one table's bytes as if it had
// been kept in memory: a server with a memory budget moves the rows past
// it to its own disk as it restores them.
StatusOr<std::vector<TableSnapshot>> GatherTables(
    const Config& config, std::map<std::string, std::vector<TableShare>> shares, int rank,
    int servers) {
  std::vector<TableSnapshot> out;
  if (shares.empty()) return out;
  auto specs = ServerTables(config);
  if (!specs.ok()) return specs.status();
  for (auto& [name, list] : shares) {
    const ServerTable* spec = nullptr;
    for (const ServerTable& t : *specs)
      if (t.options.name == name) spec = &t;
    if (spec == nullptr)
      return InvalidArgument(
          fmt::format("the checkpoint has table '{}', which the config does not", name));
    std::vector<SparseTable> tables;
    TableSnapshot gathered;
    gathered.name = name;
    for (const TableShare& share : list) {
      auto table = WholeShare(spec->options, share);
      if (!table.ok()) return table.status();
      tables.push_back(std::move(*table));
      gathered.clock = std::max(gathered.clock, share.snapshot.clock);
    }
    auto mine = SparseTable::Gather(spec->options, tables,
                                    [&](int64_t id) { return ServerOfId(id, servers) == rank; });
    if (!mine.ok()) return mine.status();
    mine->Serialize(&gathered.bytes);
    out.push_back(std::move(gathered));
  }
  return out;
}

}  // namespace

StatusOr<ShardContents> GatherReshardedShard(const CheckpointRef& checkpoint, int written_by,
                                             const Config& config, int rank, int servers,
                                             int workers) {
  auto wanted = PartitionsOf(config, rank, servers);
  if (!wanted.ok()) return wanted.status();
  ShardContents out;
  std::map<std::string, std::vector<TableShare>> tables;  // by name, each shard's
  for (int s = 0; s < written_by; ++s) {
    const std::string path = checkpoint.step_dir + "/" + ShardFileName(s);
    auto shard = ReadShardFile(path, ShardMeta{s, written_by, workers});
    if (!shard.ok()) return shard.status();
    const std::string store = checkpoint.step_dir + "/" + StoreCheckpointDirName(s);
    for (TableSnapshot& t : shard->tables)
      tables[t.name].push_back(TableShare{std::move(t), store});
    out.workers = shard->workers;
    for (PartitionSnapshot& p : shard->partitions) {
      auto it = wanted->find({p.tensor, p.part});
      if (it == wanted->end()) continue;
      if (static_cast<int64_t>(p.values.size()) != it->second)
        return FailedPrecondition(fmt::format(
            "{}: '{}' partition {} has {} elements, this job's partitions have {} "
            "(train.partition_bytes must stay the same to resume with another server count)",
            path, p.tensor, p.part, p.values.size(), it->second));
      wanted->erase(it);
      out.partitions.push_back(std::move(p));
    }
  }
  auto gathered = GatherTables(config, std::move(tables), rank, servers);
  if (!gathered.ok()) return gathered.status().WithContext(checkpoint.step_dir);
  out.tables = std::move(*gathered);
  if (!wanted->empty()) {
    const auto& [tensor, part] = wanted->begin()->first;
    return FailedPrecondition(fmt::format(
        "{}: no server shard holds '{}' partition {} ({} of this server's partitions missing)",
        checkpoint.step_dir, tensor, part, wanted->size()));
  }
  return out;
}

}  // namespace pstrain
