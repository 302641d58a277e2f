// What a server-held table's share sends its backups (roles/server/
// replication.h, roles/server/table_host.h), as the payload of a
// Replicate of kind TableState or TableOps. Little-endian, checked whole
// before any memory is taken for it:
//
//   TableState: "PSRT" u32 format (1), u32 n, the update rule's state in n
//     bytes (roles/server/handoff_codec.h, EncodeCoreState), then the rows
//     (SparseTable::Serialize) to the end.
//   TableOps: one change, as the primary made it, for the backup to make
//     the same way: u8 op, i64 step (the job's step the rows are touched
//     at), u64 n, i64 ids[n], then for kApply f32 gradients[n * dim].
//       kLookup: a pull looked the ids up (rows created, sightings counted,
//         rows touched); kApply: the optimizer took these gradients (one
//         push in async and ssp, the step's average in sync), and the
//         update rule counts worker's push; kEvict: idle rows were dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "roles/server/update_core.h"
#include "src/common/status.h"

namespace pstrain {

struct TableState {
  UpdateCore::State core;
  std::string rows;  // SparseTable::Serialize's bytes
};

std::vector<uint8_t> EncodeTableState(const UpdateCore::State& core, const std::string& rows);
StatusOr<TableState> DecodeTableState(const uint8_t* data, size_t size, const std::string& table);

enum class TableOp : uint8_t { kLookup = 0, kApply = 1, kEvict = 2 };

struct TableChange {
  TableOp op = TableOp::kLookup;
  int64_t step = 0;
  std::vector<int64_t> ids;
  std::vector<float> grads;  // kApply: dim per id
};

// `grads`: n * dim floats for kApply, else null.
std::vector<uint8_t> EncodeTableChange(TableOp op, int64_t step, const int64_t* ids, size_t n,
                                       const float* grads, int dim);
// Refused unless it is one whole change of at most `max_ids` ids of rows of
// `dim` floats, at a step that is not negative.
StatusOr<TableChange> DecodeTableChange(const uint8_t* data, size_t size, const std::string& table,
                                        int dim, int64_t max_ids);

}  // namespace pstrain
