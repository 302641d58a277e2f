#include "src/data/line_reader.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace pstrain {
namespace {

constexpr size_t kReadBytes = 4 << 20;
constexpr size_t kMaxLineBytes = 64 << 20;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

}  // namespace

Status ForEachLine(const std::string& path, const std::function<bool()>& done,
                   const std::function<Status(const TextLine&)>& on_line) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    return errno == ENOENT ? NotFound(path + ": no such file")
                           : Internal(fmt::format("{}: open: {}", path, std::strerror(errno)));
  }
  // buf[begin, end) holds unread bytes; buf[0] is at `base` in the stream.
  std::vector<char> buf(kReadBytes);
  size_t begin = 0, end = 0;
  uint64_t base = 0;
  int64_t number = 0;
  bool eof = false;
  auto emit = [&](size_t from, size_t to) {
    std::string_view text(buf.data() + from, to - from);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    return on_line({text, ++number, base + from});
  };
  while (!done()) {
    const void* nl = std::memchr(buf.data() + begin, '\n', end - begin);
    if (nl != nullptr) {
      const size_t to = static_cast<const char*>(nl) - buf.data();
      PSTRAIN_RETURN_IF_ERROR(emit(begin, to));
      begin = to + 1;
      continue;
    }
    if (eof) {
      if (begin < end) PSTRAIN_RETURN_IF_ERROR(emit(begin, end));  // no final newline
      break;
    }
    // Keep the partial line at the front and read more behind it.
    std::memmove(buf.data(), buf.data() + begin, end - begin);
    base += begin;
    end -= begin;
    begin = 0;
    if (end == buf.size()) {
      if (buf.size() >= kMaxLineBytes) {
        return InvalidArgument(fmt::format("{}: line {} (offset {}): longer than {} bytes", path,
                                           number + 1, base, kMaxLineBytes));
      }
      buf.resize(buf.size() * 2);
    }
    const int r = gzread(file.get(), buf.data() + end, static_cast<unsigned>(buf.size() - end));
    int code = Z_OK;
    const char* why = gzerror(file.get(), &code);
    if (r < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      return InvalidArgument(
          fmt::format("{}: read error at offset {}: {}", path, base + end + std::max(r, 0), why));
    }
    eof = r == 0;
    end += static_cast<size_t>(r);
  }
  return Status::OK();
}

}  // namespace pstrain
