#include "src/data/idx_reader.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace pstrain {
namespace {

constexpr uint64_t kMaxElements = uint64_t{1} << 34;  // beyond this a header is corrupt
constexpr size_t kChunkBytes = 1 << 20;
constexpr int kClasses = 10;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads an IDX stream front to back, tracking the offset for messages.
class IdxStream {
 public:
  explicit IdxStream(std::string path) : path_(std::move(path)) {}

  Status Open() {
    file_.reset(gzopen(path_.c_str(), "rb"));
    if (!file_) {
      return errno == ENOENT ? NotFound(path_ + ": no such file")
                             : Internal(fmt::format("{}: open: {}", path_, std::strerror(errno)));
    }
    gzbuffer(file_.get(), 256 * 1024);
    return Status::OK();
  }

  // Reads exactly n bytes, which are part of a `total`-byte `what`.
  Status Read(void* out, size_t n, uint64_t total, const char* what) {
    size_t got = 0;
    while (got < n) {
      const unsigned want = static_cast<unsigned>(std::min(n - got, kChunkBytes));
      const int r = gzread(file_.get(), static_cast<char*>(out) + got, want);
      int code = Z_OK;
      const char* why = gzerror(file_.get(), &code);
      // A gzip stream cut short reads as Z_BUF_ERROR: report it as truncation.
      if (r < 0 || (code != Z_OK && code != Z_STREAM_END && code != Z_BUF_ERROR)) {
        return InvalidArgument(
            fmt::format("{}: read error at offset {}: {}", path_, offset_ + got, why));
      }
      if (r == 0) {
        return InvalidArgument(fmt::format("{}: truncated at offset {}: expected {} bytes of {}",
                                           path_, offset_ + got, total, what));
      }
      got += static_cast<size_t>(r);
    }
    offset_ += n;
    return Status::OK();
  }

  // The header: magic, then one big-endian u32 per dimension.
  Status ReadHeader(uint32_t magic, std::vector<uint32_t>* dims) {
    uint8_t b[4];
    const uint64_t header_bytes = 4 + 4 * uint64_t{magic & 0xff};
    PSTRAIN_RETURN_IF_ERROR(Read(b, 4, header_bytes, "header"));
    const uint32_t got = BigEndian(b);
    if (got != magic) {
      return InvalidArgument(
          fmt::format("{}: bad magic 0x{:08x} at offset 0: expected 0x{:08x}", path_, got, magic));
    }
    dims->assign(magic & 0xff, 0);
    uint64_t total = 1;
    for (uint32_t& d : *dims) {
      PSTRAIN_RETURN_IF_ERROR(Read(b, 4, header_bytes, "header"));
      d = BigEndian(b);
      total *= std::max<uint32_t>(d, 1);
      if (total > kMaxElements) {
        return InvalidArgument(
            fmt::format("{}: implausible dimension {} at offset {}", path_, d, offset_ - 4));
      }
    }
    return Status::OK();
  }

  // Reads n bytes in chunks, handing each to `use`: memory grows only as data
  // arrives, so a header that lies about its size cannot allocate it.
  template <typename Fn>
  Status ReadBody(uint64_t n, const char* what, Fn use) {
    std::vector<uint8_t> chunk(std::min<uint64_t>(n, kChunkBytes));
    const uint64_t start = offset_;
    for (uint64_t done = 0; done < n;) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(n - done, chunk.size()));
      PSTRAIN_RETURN_IF_ERROR(Read(chunk.data(), len, n, what));
      PSTRAIN_RETURN_IF_ERROR(use(chunk.data(), len, start + done));
      done += len;
    }
    return Status::OK();
  }

  const std::string& path() const { return path_; }

 private:
  static uint32_t BigEndian(const uint8_t* b) {
    return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3];
  }
  std::string path_;
  GzFile file_;
  uint64_t offset_ = 0;
};

// The first `samples` images and labels into `data`; memory grows as they
// are read.
Status ReadSamples(IdxStream& img, IdxStream& lab, uint64_t samples, uint64_t pixels,
                   Dataset* data) {
  data->dense.reserve(std::min<uint64_t>(pixels, 1 << 26));
  PSTRAIN_RETURN_IF_ERROR(img.ReadBody(pixels, "pixels", [&](const uint8_t* p, size_t n, uint64_t) {
    for (size_t i = 0; i < n; ++i) data->dense.push_back(p[i] * (1.0f / 255.0f));
    return Status::OK();
  }));
  data->labels.reserve(std::min<uint64_t>(samples, 1 << 26));
  return lab.ReadBody(samples, "labels", [&](const uint8_t* p, size_t n, uint64_t at) {
    for (size_t i = 0; i < n; ++i) {
      if (p[i] >= kClasses) {
        return InvalidArgument(fmt::format("{}: label {} at offset {}: expected 0..{}", lab.path(),
                                           p[i], at + i, kClasses - 1));
      }
      data->labels.push_back(p[i]);
    }
    return Status::OK();
  });
}

}  // namespace

StatusOr<Dataset> LoadIdx(const std::string& images, const std::string& labels,
                          int64_t max_samples) {
  IdxStream img(images), lab(labels);
  PSTRAIN_RETURN_IF_ERROR(img.Open());
  PSTRAIN_RETURN_IF_ERROR(lab.Open());
  std::vector<uint32_t> idims, ldims;
  PSTRAIN_RETURN_IF_ERROR(img.ReadHeader(kIdxImagesMagic, &idims));
  PSTRAIN_RETURN_IF_ERROR(lab.ReadHeader(kIdxLabelsMagic, &ldims));
  if (idims[0] != ldims[0]) {
    return InvalidArgument(
        fmt::format("{}: {} labels, but {} has {} images", labels, ldims[0], images, idims[0]));
  }
  uint64_t samples = idims[0];
  if (max_samples > 0) samples = std::min<uint64_t>(samples, static_cast<uint64_t>(max_samples));
  Dataset data;
  data.sample_shape = {1, idims[1], idims[2]};
  const uint64_t pixels = samples * idims[1] * idims[2];
  try {
    PSTRAIN_RETURN_IF_ERROR(ReadSamples(img, lab, samples, pixels, &data));
  } catch (const std::bad_alloc&) {
    // The sizes come from the files: an error naming them, never an abort.
    return Unavailable(fmt::format(
        "{}: not enough memory for its {} images of {}x{} as floats ({} MiB; std::bad_alloc "
        "after {} MiB)",
        images, samples, idims[1], idims[2], pixels * sizeof(float) >> 20,
        data.dense.capacity() * sizeof(float) >> 20));
  }
  return data;
}

}  // namespace pstrain
