// DecodeMovedRows (roles/placement/row_move_codec.h) fed arbitrary bytes, as a
// server takes the table rows moved to it (seeds: one table with optimizer
// slots and ids gone since a copy ahead, one without, and a message of no
// table, corpus/row_move_fuzz/).
// Beyond the sanitizers:
//   - an error is one line;
//   - rows taken are canonical: encoding them again gives the same bytes;
//     each table's arrays have its rows' sizes, and no id, step or update
//     count is negative.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "roles/placement/row_move_codec.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  auto tables = DecodeMovedRows(data, size);
  if (!tables.ok()) {
    const std::string m = tables.status().message();
    if (m.find('\n') != std::string::npos) fuzz::Fail("an error of more than one line", m);
    if (m.find("moved table rows") == std::string::npos) fuzz::Fail("an error naming nothing", m);
    return 0;
  }
  for (const MovedRows& t : *tables) {
    const RowBatch& rows = t.rows;
    if (rows.floats != size_t{t.dim} * (1 + size_t{t.slots}))
      fuzz::Fail("rows of another size than dim and slots say", t.table);
    if (rows.data.size() != rows.size() * rows.floats || rows.last_touched.size() != rows.size() ||
        rows.updates.size() != rows.size())
      fuzz::Fail("a table's arrays differ in size", t.table);
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows.ids[i] < 0 || rows.last_touched[i] < 0 || rows.updates[i] < 0)
        fuzz::Fail("a negative id, step or update count", t.table);
    for (int64_t id : t.gone)
      if (id < 0) fuzz::Fail("a negative gone id", t.table);
  }
  std::string again;
  EncodeMovedRows(*tables, &again);
  if (again.size() != size ||
      (size > 0 && again.compare(0, size, reinterpret_cast<const char*>(data), size) != 0))
    fuzz::Fail("rows taken are not their own encoding");
  return 0;
}
