// The sizes a parsed config implies, checked against stated caps before
// anything is allocated: a config can describe a model that no
// machine could hold (`out: 2000000000`), and that must be a one-line error
// naming the file, line and key, not an allocation failure later on.
//
// Caps (docs/security.md, "Limits"):
//   - one tensor (a parameter, a batch's input, a layer's output for a batch,
//     a worker's cache or staging rows of a table): at most 2^31-1 elements;
//   - all dense parameters together (those a worker holds; tables held by
//     the servers only grow by the rows touched): at most 2^32 elements, i.e.
//     16 GiB of float32, before gradients and optimizer state;
//   - embedding_bag: dim at most 65536, vocab at most 2^40 (hashed ids;
//     a server-held table creates only the rows it is asked for);
//   - a server-held table's max_rows (its index is reserved up front, about
//     64 bytes a row): at most 2^28.
// These are estimates from the same shape rules the layers use (src/nn);
// Model::Build stays the judge of whether shapes fit together.
#pragma once

#include <cstdint>

#include "src/common/config/config.h"
#include "src/common/status.h"

namespace pstrain {

inline constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxModelElements = int64_t{1} << 32;
inline constexpr int64_t kMaxEmbeddingDim = 65536;
inline constexpr int64_t kMaxEmbeddingVocab = int64_t{1} << 40;
inline constexpr int64_t kMaxTableRows = int64_t{1} << 28;
// A server's memory budget for one table's rows (1 TiB).
inline constexpr int64_t kMaxServerCacheBytes = int64_t{1} << 40;

// Rows a worker stages for server-held tables: a batch's ids, at least an
// evaluation batch of this many samples (roles/worker/trainer.cc).
inline constexpr int64_t kMinStagedBatch = 1024;

// Checks `config` (already parsed) against the caps above.
Status CheckConfigSizes(const Config& config);

}  // namespace pstrain
