#include "src/data/criteo_reader.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "src/common/random.h"

namespace pstrain {
namespace {

constexpr size_t kReadBytes = 4 << 20;
constexpr size_t kMaxLineBytes = 64 << 20;  // longer means this is not a TSV file
constexpr size_t kShownBytes = 40;          // of a bad value, in messages

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

std::string_view Shown(std::string_view v) { return v.substr(0, kShownBytes); }

// Criteo's integers, or any decimal number; false when `v` is not one.
bool ParseNumber(std::string_view v, double* x) {
  const char* end = v.data() + v.size();
  int64_t i = 0;
  auto r = std::from_chars(v.data(), end, i);
  if (r.ec == std::errc() && r.ptr == end) {
    *x = static_cast<double>(i);
    return true;
  }
  auto d = std::from_chars(v.data(), end, *x);
  return d.ec == std::errc() && d.ptr == end && std::isfinite(*x);
}

// Splits `line` at tabs into `cols`; returns how many fields it has (which
// may exceed kCriteoColumns; only the first kCriteoColumns are kept).
int SplitColumns(std::string_view line, std::string_view* cols) {
  int n = 0;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    if (n < kCriteoColumns) cols[n] = line.substr(start, tab - start);
    ++n;
    if (tab == std::string_view::npos) return n;
    start = tab + 1;
  }
}

}  // namespace

uint64_t CriteoHash(int field, std::string_view value) {
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

Status ParseCriteoLine(std::string_view line, int64_t vocab, float* label, float* dense,
                       int64_t* ids) {
  assert(vocab > 0);
  std::string_view cols[kCriteoColumns];
  const int n = SplitColumns(line, cols);
  if (n != kCriteoColumns) {
    return InvalidArgument(
        fmt::format("expected {} tab-separated fields, got {}", kCriteoColumns, n));
  }
  if (cols[0] != "0" && cols[0] != "1") {
    return InvalidArgument(fmt::format("label '{}': expected 0 or 1", Shown(cols[0])));
  }
  *label = cols[0] == "1" ? 1.0f : 0.0f;
  for (int j = 0; j < kCriteoDense; ++j) {
    const std::string_view v = cols[1 + j];
    double x = 0;
    if (!v.empty() && !ParseNumber(v, &x)) {
      return InvalidArgument(fmt::format("I{} '{}': expected a number", j + 1, Shown(v)));
    }
    dense[j] = static_cast<float>(std::log1p(std::max(x, 0.0)));
  }
  for (int f = 0; f < kCriteoCategorical; ++f) {
    ids[f] = static_cast<int64_t>(CriteoHash(f, cols[1 + kCriteoDense + f]) %
                                  static_cast<uint64_t>(vocab));
  }
  return Status::OK();
}

namespace {

Status AppendLines(const std::string& path, int64_t vocab, int64_t max_samples, Dataset* out) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    return errno == ENOENT ? NotFound(path + ": no such file")
                           : Internal(fmt::format("{}: open: {}", path, std::strerror(errno)));
  }
  // buf[begin, end) holds unparsed bytes; buf[0] is at `base` in the stream.
  std::vector<char> buf(kReadBytes);
  size_t begin = 0, end = 0;
  uint64_t base = 0;
  int64_t line_no = 0;
  bool eof = false;
  auto parse = [&](size_t from, size_t to) {
    ++line_no;
    std::string_view line(buf.data() + from, to - from);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t at = out->labels.size();
    out->labels.resize(at + 1);
    out->dense.resize((at + 1) * kCriteoDense);
    out->sparse.resize((at + 1) * kCriteoCategorical);
    Status s = ParseCriteoLine(line, vocab, &out->labels[at], &out->dense[at * kCriteoDense],
                               &out->sparse[at * kCriteoCategorical]);
    if (s.ok()) return s;
    return s.WithContext(fmt::format("{}: line {} (offset {})", path, line_no, base + from));
  };
  while (max_samples == 0 || out->size() < max_samples) {
    const void* nl = std::memchr(buf.data() + begin, '\n', end - begin);
    if (nl != nullptr) {
      const size_t to = static_cast<const char*>(nl) - buf.data();
      PSTRAIN_RETURN_IF_ERROR(parse(begin, to));
      begin = to + 1;
      continue;
    }
    if (eof) {
      if (begin < end) PSTRAIN_RETURN_IF_ERROR(parse(begin, end));  // no final newline
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
                                           line_no + 1, base, kMaxLineBytes));
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

}  // namespace

Status AppendCriteo(const std::string& path, int64_t vocab, int64_t max_samples, Dataset* out) {
  if (out->sample_shape.empty()) {
    out->sample_shape = {kCriteoDense};
    out->fields = kCriteoCategorical;
  }
  assert(out->sample_shape == Shape{kCriteoDense} && out->fields == kCriteoCategorical);
  const int64_t before = out->size();
  try {
    return AppendLines(path, vocab, max_samples, out);
  } catch (const std::bad_alloc&) {
    // Memory grows with the file's lines: an error naming it, never an abort.
    return Unavailable(fmt::format(
        "{}: not enough memory for its samples (std::bad_alloc after {} of its lines, {} "
        "samples loaded in all, {} MiB)",
        path, out->size() - before, out->size(),
        (out->dense.capacity() * sizeof(float) + out->sparse.capacity() * sizeof(int64_t)) >> 20));
  }
}

}  // namespace pstrain
