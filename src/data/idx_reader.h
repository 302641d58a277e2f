// Reader for the IDX files of the MNIST family (MNIST, Fashion-MNIST): an
// image file (magic 0x00000803: u8 pixels, N x rows x cols) and a label file
// (magic 0x00000801: u8 labels 0..9), gzip-compressed or raw. Headers are
// big-endian. Every error names the file and the byte offset (in the
// uncompressed stream) where the problem is.
#pragma once

#include <string>

#include "src/common/status.h"
#include "src/data/dataset.h"

namespace pstrain {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

// Samples of shape [1, rows, cols], pixels scaled to [0, 1]; labels 0..9.
// `max_samples` > 0: only the first that many (the headers are still
// checked against each other).
StatusOr<Dataset> LoadIdx(const std::string& images, const std::string& labels,
                          int64_t max_samples = 0);

}  // namespace pstrain
