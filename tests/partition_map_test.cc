// The partition map: even spread of bytes over servers, the same map on every
// node, and every element covered exactly once.
#include "comm/ps/partition_map.h"

#include <doctest/doctest.h>

#include <algorithm>

namespace pstrain {
namespace {

std::vector<TensorSpec> Model() {
  // A LeNet-like mix: small biases, mid-size weights, and one tensor larger
  // than a partition.
  return {{"conv1.weight", 150},     {"conv1.bias", 6},     {"conv2.weight", 2400},
          {"conv2.bias", 16},        {"fc1.weight", 48000}, {"fc1.bias", 120},
          {"emb.weight", 3'000'001}, {"fc2.weight", 10080}, {"fc2.bias", 84}};
}

TEST_CASE("every element is covered exactly once, in order") {
  auto map = PartitionMap::Build(Model(), 3, 1 << 20);
  REQUIRE(map.ok());
  for (size_t t = 0; t < map->tensors().size(); ++t) {
    int64_t next = 0;
    for (const Partition& p : map->partitions(static_cast<int>(t))) {
      CHECK(p.offset == next);
      CHECK(p.elements > 0);
      CHECK(p.elements * 4 <= (1 << 20));
      CHECK(p.server >= 0);
      CHECK(p.server < 3);
      next += p.elements;
    }
    CHECK(next == map->tensors()[t].elements);
  }
  // 3,000,001 floats in 1 MiB partitions: 12 parts whose sizes differ by <= 1.
  const auto& big = map->partitions(map->Find("emb.weight"));
  REQUIRE(big.size() == 12);
  auto [lo, hi] = std::minmax_element(big.begin(), big.end(),
                                      [](auto& a, auto& b) { return a.elements < b.elements; });
  CHECK(hi->elements - lo->elements <= 1);
}

TEST_CASE("bytes spread evenly over the servers") {
  for (int servers : {1, 2, 3, 4, 8}) {
    CAPTURE(servers);
    auto map = PartitionMap::Build(Model(), servers, 256 * 1024);
    REQUIRE(map.ok());
    auto bytes = map->BytesPerServer();
    auto [lo, hi] = std::minmax_element(bytes.begin(), bytes.end());
    // Greedy largest-first keeps the spread within one partition.
    CHECK(*hi - *lo <= 256 * 1024);
  }
}

TEST_CASE("the map is a pure function of the model") {
  auto a = PartitionMap::Build(Model(), 4, 64 * 1024);
  auto b = PartitionMap::Build(Model(), 4, 64 * 1024);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (size_t t = 0; t < Model().size(); ++t) {
    const auto& pa = a->partitions(static_cast<int>(t));
    const auto& pb = b->partitions(static_cast<int>(t));
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      CHECK(pa[i].server == pb[i].server);
      CHECK(pa[i].offset == pb[i].offset);
    }
  }
}

TEST_CASE("bad models are refused with the reason") {
  CHECK(PartitionMap::Build({{"a", 1}, {"a", 2}}, 1, 4096)
            .status()
            .message()
            .find("registered twice") != std::string::npos);
  CHECK_FALSE(PartitionMap::Build({{"a", 0}}, 1, 4096).ok());
  CHECK_FALSE(PartitionMap::Build({{"", 3}}, 1, 4096).ok());
  CHECK_FALSE(PartitionMap::Build({{"a", 3}}, 0, 4096).ok());
  CHECK_FALSE(PartitionMap::Build({{"a", 3}}, 1, 4094).ok());
  CHECK(PartitionMap::Build({{"a", 3}}, 1, 4096)->Find("b") == -1);
}

}  // namespace
}  // namespace pstrain
