// RowBatch: rows of one table in transit between memory and disk (the
// SparseTable and the RowStore), as a struct of arrays: row i is ids[i],
// floats values and optimizer slots at data[i * floats], its last-touched
// step and its update count. Plain data, no invariants beyond the sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pstrain {

struct RowBatch {
  explicit RowBatch(size_t floats_per_row = 0) : floats(floats_per_row) {}

  size_t size() const { return ids.size(); }
  bool empty() const { return ids.empty(); }
  float* row(size_t i) { return data.data() + i * floats; }
  const float* row(size_t i) const { return data.data() + i * floats; }

  void Clear() {
    ids.clear();
    data.clear();
    last_touched.clear();
    updates.clear();
  }
  // Appends a row; `values` holds `floats` floats (values, then slots).
  void Add(int64_t id, const float* values, int64_t touched, int64_t row_updates) {
    ids.push_back(id);
    data.insert(data.end(), values, values + floats);
    last_touched.push_back(touched);
    updates.push_back(row_updates);
  }

  // Appends every row of `other` (same floats per row), in its order.
  void Append(const RowBatch& other) {
    ids.insert(ids.end(), other.ids.begin(), other.ids.end());
    data.insert(data.end(), other.data.begin(), other.data.end());
    last_touched.insert(last_touched.end(), other.last_touched.begin(), other.last_touched.end());
    updates.insert(updates.end(), other.updates.begin(), other.updates.end());
  }
  // Keeps the first `rows` rows.
  void Truncate(size_t rows) {
    ids.resize(rows);
    data.resize(rows * floats);
    last_touched.resize(rows);
    updates.resize(rows);
  }

  size_t floats;  // per row: dim * (1 + optimizer slots)
  std::vector<int64_t> ids;
  std::vector<float> data;
  std::vector<int64_t> last_touched;
  std::vector<int64_t> updates;
};

}  // namespace pstrain
