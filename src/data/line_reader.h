// Reading a text data file (gzip or plain) line by line, for the click-data
// readers: each line's text without its "\n" or "\r\n", its number (1-based)
// and the byte offset of its start in the uncompressed stream, so that an
// error can name where a bad line is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "src/common/status.h"

namespace pstrain {

struct TextLine {
  std::string_view text;
  int64_t number = 0;
  uint64_t offset = 0;
};

// Calls `on_line` for each line of `path` (a last line without a newline
// too) until it returns an error, which is returned, or `done` returns true
// before a line. A line longer than 64 MiB is an error: such a file is not
// line-oriented text.
Status ForEachLine(const std::string& path, const std::function<bool()>& done,
                   const std::function<Status(const TextLine&)>& on_line);

}  // namespace pstrain
