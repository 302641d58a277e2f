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
//   the update rule's state (UpdateCore::State), for n worker slots:
//   u32 n, i64 applied, i64 async base step, i64 async base applied,
//   i64 pushes[n], u8 member[n] (0 or 1),
//   u32 announced changes, each: i64 from step, u8 member[n]
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "roles/checkpoint/shard_file.h"
#include "roles/server/update_core.h"
#include "src/common/status.h"

namespace pstrain {

// A partition as it moves: its values, optimizer and clocks, and the state
// of its update rule.
struct MovedPartition {
  PartitionSnapshot partition;
  UpdateCore::State core;
};

std::vector<uint8_t> EncodePartitionState(const MovedPartition& moved);

// The state of (tensor, part) from `size` bytes: refused unless it is whole,
// holds 1 to `max_elements` values, at most 8 optimizer slots of as many,
// 1 to 65536 worker slots with a member among them, at most 64 announced
// changes, and nothing follows it.
StatusOr<MovedPartition> DecodePartitionState(const uint8_t* data, size_t size,
                                              const std::string& tensor, uint32_t part,
                                              int64_t max_elements);

// The update rule's state alone (the tail of a partition's state above),
// also carried by a replicated table's state (roles/server/table_replica_codec.h).
std::vector<uint8_t> EncodeCoreState(const UpdateCore::State& core);
// Refused as the partition's tail is, and unless it ends at `size`.
StatusOr<UpdateCore::State> DecodeCoreState(const uint8_t* data, size_t size);

}  // namespace pstrain
