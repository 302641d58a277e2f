// DecodePartitionState (roles/server/handoff_codec.h) fed arbitrary bytes,
// as a server takes a partition moved to it (seeds: states with and without
// optimizer slots, corpus/handoff_fuzz/). Byte 0 picks the most values a
// partition may hold (1..256); the rest is the state.
// Beyond the sanitizers:
//   - an error is one line naming the partition;
//   - a state taken is canonical: encoding it again gives the same bytes;
//     it holds no more values than allowed, and every optimizer slot and
//     member list has its size.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "roles/server/handoff_codec.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  if (size < 1) return 0;
  const int64_t max_elements = 1 + int64_t{data[0]};
  auto state = DecodePartitionState(data + 1, size - 1, "w", 3, max_elements);
  if (!state.ok()) {
    const std::string m = state.status().message();
    if (m.find('\n') != std::string::npos) fuzz::Fail("an error of more than one line", m);
    if (m.find("'w' partition 3") == std::string::npos)
      fuzz::Fail("an error naming no partition", m);
    return 0;
  }
  const std::vector<float>& values = state->partition.values;
  if (values.empty() || static_cast<int64_t>(values.size()) > max_elements)
    fuzz::Fail("a state of more values than allowed, or none");
  for (const auto& [name, slot] : state->partition.slots)
    if (slot.size() != values.size()) fuzz::Fail("a slot of another size", name);
  const UpdateCore::State& core = state->core;
  if (core.members.size() != core.pushes.size()) fuzz::Fail("members and pushes differ in size");
  for (const auto& [step, members] : core.changes)
    if (members.size() != core.pushes.size()) fuzz::Fail("a change of another size");
  std::vector<uint8_t> again = EncodePartitionState(*state);
  if (again.size() != size - 1 || std::memcmp(again.data(), data + 1, again.size()) != 0)
    fuzz::Fail("a state taken is not its own encoding");
  return 0;
}
