#include "roles/server/reshard.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "comm/ps/partition_map.h"
#include "comm/ps/row_placement.h"
#include "embedding/sparse_table.h"
#include "roles/checkpoint/model_layout.h"
#include "roles/checkpoint/step_files.h"
#include "roles/placement/server_tables.h"

namespace pstrain {

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
  if (found == 0)
    return InvalidArgument(
        fmt::format("{}: the MANIFEST lists no server shard file", checkpoint.step_dir));
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

// Each table's rows that server `rank` of `servers` holds (ServerOfId),
// from every shard's share of it.
StatusOr<std::vector<TableSnapshot>> GatherTables(
    const Config& config, std::map<std::string, std::vector<TableSnapshot>> shares, int rank,
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
    for (const TableSnapshot& share : list) {
      auto table = SparseTable::Deserialize(spec->options, share.bytes.data(), share.bytes.size());
      if (!table.ok()) return table.status();
      tables.push_back(std::move(*table));
      gathered.clock = std::max(gathered.clock, share.clock);
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
  std::map<std::string, std::vector<TableSnapshot>> tables;  // by name, each shard's
  for (int s = 0; s < written_by; ++s) {
    const std::string path = checkpoint.step_dir + "/" + ShardFileName(s);
    auto shard = ReadShardFile(path, ShardMeta{s, written_by, workers});
    if (!shard.ok()) return shard.status();
    bool tiered = shard->has_store;
    for (const TableSnapshot& t : shard->tables) tiered |= t.tiered;
    if (tiered)
      return FailedPrecondition(fmt::format(
          "{} keeps table rows on disk, which cannot move between servers yet: resume this "
          "checkpoint with {} servers, as it was written",
          path, written_by));
    for (TableSnapshot& t : shard->tables) tables[t.name].push_back(std::move(t));
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
