#include "comm/ps/partition_map.h"

#include <fmt/format.h>

#include <algorithm>

namespace pstrain {

StatusOr<PartitionMap> PartitionMap::Build(std::vector<TensorSpec> tensors, int servers,
                                           int64_t partition_bytes) {
  if (servers <= 0) return InvalidArgument("PS-managed tensors need at least one server");
  if (partition_bytes < 4 || partition_bytes % 4 != 0)
    return InvalidArgument(
        fmt::format("partition size {} is not a positive multiple of 4 bytes", partition_bytes));
  PartitionMap map;
  map.servers_ = servers;
  map.tensors_ = std::move(tensors);
  const int64_t per_part = partition_bytes / 4;
  std::vector<Partition*> all;
  map.partitions_.resize(map.tensors_.size());
  for (size_t t = 0; t < map.tensors_.size(); ++t) {
    const TensorSpec& spec = map.tensors_[t];
    if (spec.name.empty()) return InvalidArgument(fmt::format("tensor {} has no name", t));
    if (spec.elements <= 0)
      return InvalidArgument(fmt::format("tensor '{}' has {} elements", spec.name, spec.elements));
    if (!map.index_.emplace(spec.name, static_cast<int>(t)).second)
      return InvalidArgument(fmt::format("tensor '{}' is registered twice", spec.name));
    int64_t parts = (spec.elements + per_part - 1) / per_part;
    int64_t base = spec.elements / parts, extra = spec.elements % parts, offset = 0;
    for (int64_t p = 0; p < parts; ++p) {
      int64_t n = base + (p < extra ? 1 : 0);
      map.partitions_[t].push_back(
          Partition{static_cast<int>(t), static_cast<uint32_t>(p), offset, n, 0});
      offset += n;
    }
  }
  for (auto& parts : map.partitions_)
    for (Partition& p : parts) all.push_back(&p);
  std::stable_sort(all.begin(), all.end(), [](const Partition* a, const Partition* b) {
    return a->elements > b->elements;
  });
  std::vector<int64_t> load(servers, 0);
  for (Partition* p : all) {
    int best = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    p->server = best;
    load[best] += p->elements * 4;
  }
  return map;
}

int PartitionMap::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

std::vector<int64_t> PartitionMap::BytesPerServer() const {
  std::vector<int64_t> bytes(servers_, 0);
  for (const auto& parts : partitions_)
    for (const Partition& p : parts) bytes[p.server] += p.elements * 4;
  return bytes;
}

}  // namespace pstrain
