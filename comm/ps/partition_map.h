// PartitionMap: how PS-managed tensors are cut into partitions and spread
// over the servers. Every node computes it from the same tensor list (the
// model) and gets the same map, so no node has to be told where a partition
// lives.
//
//   - A tensor of B bytes becomes ceil(B / partition_bytes) partitions of
//     near-equal size (element counts differ by at most one).
//   - Partitions go to servers largest first, each to the server holding the
//     fewest bytes so far (ties: lowest rank), so bytes per server are even.
//   - Ordering ties are broken by (tensor index, partition index): the map is
//     a pure function of its inputs.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/common/status.h"

namespace pstrain {

struct TensorSpec {
  std::string name;
  int64_t elements = 0;  // float32
};

struct Partition {
  int tensor = 0;      // index into the tensor list
  uint32_t part = 0;   // index within the tensor
  int64_t offset = 0;  // first element
  int64_t elements = 0;
  int server = 0;
};

class PartitionMap {
 public:
  // Fails on an empty or duplicate name, a tensor of no elements, no
  // servers, or a partition size that is not a positive multiple of 4.
  static StatusOr<PartitionMap> Build(std::vector<TensorSpec> tensors, int servers,
                                      int64_t partition_bytes);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  // Partitions of tensor `t`, in order of offset.
  const std::vector<Partition>& partitions(int t) const { return partitions_[t]; }
  // Index of the tensor called `name`, or -1.
  int Find(const std::string& name) const;
  int servers() const { return servers_; }
  // Bytes held by each server.
  std::vector<int64_t> BytesPerServer() const;

 private:
  std::vector<TensorSpec> tensors_;
  std::vector<std::vector<Partition>> partitions_;
  std::unordered_map<std::string, int> index_;
  int servers_ = 0;
};

}  // namespace pstrain
