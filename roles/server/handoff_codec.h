// The state of one partition as it travels in a live move between servers
// (roles/server/handoff.h): the payload of a HandOffReply and of the
// TakeOverRequest that installs it. Little-endian, checked whole before
// any memory is taken for it:
//
//   "PSHO"  u32 format (1)
//   i64 applied, i64 clock, u64 optimizer steps     (PartitionSnapshot)
//   u64 elements, u32 optimizer slots
//   f32 values[elements]
//   per slot: u32 name bytes, the name, f32 slot[elements]
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "roles/checkpoint/shard_file.h"
#include "src/common/status.h"

namespace pstrain {

std::vector<uint8_t> EncodePartitionState(const PartitionSnapshot& partition);

// The state of (tensor, part) from `size` bytes: refused unless it is whole,
// holds 1 to `max_elements` values and at most 8 slots of as many, and
// nothing follows it.
StatusOr<PartitionSnapshot> DecodePartitionState(const uint8_t* data, size_t size,
                                                 const std::string& tensor, uint32_t part,
                                                 int64_t max_elements);

}  // namespace pstrain
