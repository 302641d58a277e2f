#include "src/common/config/text.h"

#include <fmt/format.h>

namespace pstrain {
namespace {

// The length of the UTF-8 sequence starting at text[i], or 0 when it is not
// a valid one (truncated, overlong, a surrogate, or beyond U+10FFFF).
size_t Utf8Length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char b0 = byte(0);
  size_t n;
  unsigned min_second = 0x80, max_second = 0xBF;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) min_second = 0xA0;  // overlong
    if (b0 == 0xED) max_second = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) min_second = 0x90;  // overlong
    if (b0 == 0xF4) max_second = 0x8F;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(1) < min_second || byte(1) > max_second) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  return n;
}

}  // namespace

Status CheckConfigText(std::string_view text, const std::string& source) {
  if (text.size() > kMaxConfigBytes)
    return InvalidArgument(fmt::format("{}: {} bytes: a config is at most {} bytes", source,
                                       text.size(), kMaxConfigBytes));
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto where = [&] {
      return fmt::format("{}:{}: column {}", source, line, i - line_start + 1);
    };
    if (c == '\n') {
      ++line;
      line_start = ++i;
      continue;
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
      continue;
    }
    if ((c < 0x20 && c != '\t') || c == 0x7F)
      return InvalidArgument(fmt::format(
          "{}: control character 0x{:02x} (a config may hold tabs and newlines, no other)", where(),
          c));
    const size_t n = Utf8Length(text, i);
    if (n == 0)
      return InvalidArgument(fmt::format("{}: byte 0x{:02x} is not valid UTF-8", where(), c));
    i += n;
  }
  return Status::OK();
}

}  // namespace pstrain
