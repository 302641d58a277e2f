// Click logs in the Criteo TSV layout: one sample per line,
//   label \t I1 .. I13 \t C1 .. C26
// label 0 or 1; I* integers (Criteo's counts; a decimal number is accepted);
// C* categorical values (hex strings such as 68fd1e64). Any field but the
// label may be empty. Files may be gzip-compressed.
//
// The layout is a schema preset (schema_reader.h): dense x -> log(1 +
// max(x, 0)), empty -> 0; categorical value v of field f (0-based) ->
// CriteoHash(f, v) % vocab, so an empty value is its own per-field bucket.
// A csv schema with the same columns reads the same samples.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/config/model_config.h"
#include "src/common/random.h"
#include "src/common/status.h"
#include "src/data/dataset.h"

namespace pstrain {

inline constexpr int kCriteoDense = 13;
inline constexpr int kCriteoCategorical = 26;
inline constexpr int kCriteoColumns = 1 + kCriteoDense + kCriteoCategorical;

// 64-bit FNV-1a over the field index (4 bytes, little-endian) followed by the
// value's bytes, finished with SplitMix64's mix so that the low bits (which
// `% vocab` keeps) depend on every input byte. Defined byte by byte, so ids
// are the same on every platform and build. Every schema's categorical
// values hash this way. Inline: the readers call it for every value.
inline uint64_t CriteoHash(int field, std::string_view value) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a offset basis
  auto add = [&h](uint8_t byte) {
    h ^= byte;
    h *= 1099511628211ULL;  // FNV-1a prime
  };
  const auto f = static_cast<uint32_t>(field);
  for (int i = 0; i < 4; ++i) add(static_cast<uint8_t>(f >> (8 * i)));
  for (char c : value) add(static_cast<uint8_t>(c));
  return Mix64(h);
}

// The columns of the layout: label, I1..I13 (dense, log1p), C1..C26
// (categorical, hashed).
std::vector<ColumnConfig> CriteoColumns();

// Appends the samples of `path` to `out` (sample shape [13], 26 fields),
// stopping once `out` holds `max_samples` (0: no limit); a bad line fails.
Status AppendCriteo(const std::string& path, int64_t vocab, int64_t max_samples, Dataset* out);

}  // namespace pstrain
