// The initial values of an embedding row: a pure function of (table seed, id,
// init, init_scale, dim). A row may be created on any server, at any step,
// and re-created after eviction; it always starts from the same values, so
// results do not depend on placement or on the order rows are first touched.
// Stateless and thread-safe.
#pragma once

#include <cstdint>

#include "embedding/table_options.h"

namespace pstrain {

// Writes options.dim floats to out. Element j's random bits are Mix64 of a
// counter (row key + j), where row key = StreamSeed(seed, id): no generator
// state, no <random> distributions (their output differs between standard
// libraries). Normal values come in Box-Muller pairs computed in double;
// std::log/cos/sqrt may differ in the last bit of a double between C
// libraries, which after rounding to float changes a value rarely, if ever.
void InitRow(const EmbeddingTableOptions& options, int64_t id, float* out);

}  // namespace pstrain
