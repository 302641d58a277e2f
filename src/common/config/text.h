// The checks a config's bytes pass before a YAML parser sees them: a size
// cap, valid UTF-8, and no control characters but tab and newline (a CR only
// before a newline). yaml-cpp trusts its input more than a node may: a
// three-byte file (",\x03\n") once made it loop, allocating without bound.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "src/common/status.h"

namespace pstrain {

// The largest config file taken: configs are a few KiB; this leaves room for
// long parameter lists while keeping whatever a parser does with it small.
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// OK, or an InvalidArgument "SOURCE:LINE: ..." naming the first bad byte.
Status CheckConfigText(std::string_view text, const std::string& source);

}  // namespace pstrain
