// The rows of one or more embedding tables as they move live from one
// server to another when servers join or leave (ServerRows::TakeRows on the
// server they leave, ServerRows::PutRows on the one they join;
// roles/server/table_rows.h), in one message. Little-endian, fixed width,
// checked whole before any memory is taken for it:
//
//   "PSRM"  u32 format (2)
//   u32 tables
//   per table:
//     u32 name bytes, the name
//     u32 dim, u32 slots (optimizer floats per element),
//     i64 table updates (the lr schedule's clock where they come from), u64 rows
//     i64 ids[rows], i64 last_touched[rows], i64 updates[rows]
//     f32 data[rows * dim * (1 + slots)]: each row's values, then its slots
//     u64 gone, i64 gone_ids[gone]
//
// Columns, as RowBatch holds them, so that each is one copy each way.
// No checksum, as for the dense partitions that move over the same
// connections (handoff_codec.h): the bytes are checked where they are made
// and taken (frames, TLS when on), not per message kind, and a format
// without one lets the fuzzer reach every field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "embedding/row_batch.h"
#include "src/common/status.h"

namespace pstrain {

// One table's rows: rows.floats is dim * (1 + slots).
struct MovedRows {
  std::string table;
  uint32_t dim = 0;
  uint32_t slots = 0;  // optimizer floats per element (SparseOptimizer::num_slots)
  // Pushes the table applied on the server the rows leave (its lr
  // schedule's clock, SparseTable::table_updates): a server that joined
  // live goes on from there.
  int64_t table_updates = 0;
  RowBatch rows;
  // The last part of a move copied ahead (roles/server/table_moves.h): ids
  // of rows copied earlier that no longer exist; empty otherwise.
  std::vector<int64_t> gone;
};

// Appends the message for `tables` to *out. Each table's rows must have
// rows.floats == dim * (1 + slots) and arrays of one size (asserted).
void EncodeMovedRows(const std::vector<MovedRows>& tables, std::string* out);

// The tables `size` bytes hold; InvalidArgument naming what is wrong (and
// the table) unless the message is whole and nothing follows it, holds at
// most 4096 tables of distinct names of 1 to 256 printable bytes, each of
// dim >= 1 and at most 8 slots, with no negative id (of a row or gone),
// step or update count (of a row or of the table).
// Ids are not compared with each other: PutRows refuses an id twice.
StatusOr<std::vector<MovedRows>> DecodeMovedRows(const void* data, size_t size);

}  // namespace pstrain
