// Reader for click logs in the Criteo TSV layout: one sample per line,
//   label \t I1 .. I13 \t C1 .. C26
// label 0 or 1; I* integers (Criteo's counts; a decimal number is accepted);
// C* categorical values (hex strings such as 68fd1e64). Any field but the
// label may be empty. Files may be gzip-compressed.
//
// Features: dense x -> log(1 + max(x, 0)), empty -> 0; categorical value v of
// field f (0-based) -> CriteoHash(f, v) % vocab, so an empty value is its own
// per-field bucket. Every error names the file, the line (1-based) and the
// byte offset of the line's start.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/status.h"
#include "src/data/dataset.h"

namespace pstrain {

inline constexpr int kCriteoDense = 13;
inline constexpr int kCriteoCategorical = 26;
inline constexpr int kCriteoColumns = 1 + kCriteoDense + kCriteoCategorical;

// 64-bit FNV-1a over the field index (4 bytes, little-endian) followed by the
// value's bytes, finished with SplitMix64's mix so that the low bits (which
// `% vocab` keeps) depend on every input byte. Defined byte by byte, so ids
// are the same on every platform and build.
uint64_t CriteoHash(int field, std::string_view value);

// One parsed line. `dense` has kCriteoDense values, `ids` kCriteoCategorical.
// The message of an error says what is wrong with the line (no location).
Status ParseCriteoLine(std::string_view line, int64_t vocab, float* label, float* dense,
                       int64_t* ids);

// Appends the samples of `path` to `out` (sample shape [13], 26 fields),
// stopping once `out` holds `max_samples` (0: no limit).
Status AppendCriteo(const std::string& path, int64_t vocab, int64_t max_samples, Dataset* out);

}  // namespace pstrain
