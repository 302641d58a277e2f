#include "src/data/gen_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "src/data/dataset.h"
#include "src/data/metrics.h"

namespace pstrain {
namespace {

constexpr size_t kFlushBytes = 4 << 20;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

Status IoError(const std::string& path, const char* op) {
  return Internal(fmt::format("{}: {}: {}", path, op, std::strerror(errno)));
}

// Writes rows [first, first + count) of `stream` to `path`; collects the
// planted probabilities and labels when `probs` is set.
Status WriteRows(const RowWriter& write_row, size_t max_row_bytes, uint64_t stream_seed,
                 int64_t first, int64_t count, const std::string& path, std::vector<float>* probs,
                 std::vector<float>* labels) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (!file) return IoError(path, "open");
  std::vector<char> buf(kFlushBytes + max_row_bytes);
  char* p = buf.data();
  for (int64_t i = first; i < first + count; ++i) {
    Rng rng(StreamSeed(stream_seed, static_cast<uint64_t>(i)));
    double prob = 0;
    bool label = false;
    p = write_row(&rng, p, &prob, &label);
    if (probs != nullptr) {
      probs->push_back(static_cast<float>(prob));
      labels->push_back(label ? 1.0f : 0.0f);
    }
    if (static_cast<size_t>(p - buf.data()) >= kFlushBytes || i + 1 == first + count) {
      const size_t n = static_cast<size_t>(p - buf.data());
      if (std::fwrite(buf.data(), 1, n, file.get()) != n) return IoError(path, "write");
      p = buf.data();
    }
  }
  if (std::fclose(file.release()) != 0) return IoError(path, "close");
  return Status::OK();
}

Status CheckShape(const GenShape& o) {
  if (o.rows <= 0) return InvalidArgument(fmt::format("rows {}: expected > 0", o.rows));
  if (o.shards < 1 || o.shards > 100000 || o.shards > o.rows) {
    return InvalidArgument(fmt::format("shards {}: expected 1..min(rows, 100000)", o.shards));
  }
  if (o.test_rows < -1)
    return InvalidArgument(fmt::format("test rows {}: expected >= 0", o.test_rows));
  if (o.out_dir.empty()) return InvalidArgument("no output directory");
  return Status::OK();
}

// Removes the files of an earlier run: its extra shards would be read as
// part of this data set, its test file would belong to another model.
Status RemoveStaleFiles(const std::string& dir) {
  auto stale = ListShards(dir + "/train.txt");
  if (!stale.ok()) return stale.status();
  for (const ShardFile& s : *stale) {
    if (std::remove(s.path.c_str()) != 0) return IoError(s.path, "remove");
  }
  const std::string test = dir + "/test.txt";
  if (std::remove(test.c_str()) != 0 && errno != ENOENT) return IoError(test, "remove");
  return Status::OK();
}

}  // namespace

double BiasFor(const std::vector<double>& logits, double rate) {
  double lo = -30, hi = 30, bias = 0;
  for (int i = 0; i < 60; ++i) {
    bias = (lo + hi) / 2;
    double mean = 0;
    for (double l : logits) mean += 1 / (1 + std::exp(-(bias + l)));
    (mean / static_cast<double>(logits.size()) < rate ? lo : hi) = bias;
  }
  return bias;
}

StatusOr<GenReport> WriteDataSet(const GenShape& shape, size_t max_row_bytes,
                                 const RowWriter& write_row) {
  PSTRAIN_RETURN_IF_ERROR(CheckShape(shape));
  std::error_code ec;
  std::filesystem::create_directories(shape.out_dir, ec);
  if (ec) return Internal(fmt::format("{}: create directory: {}", shape.out_dir, ec.message()));
  PSTRAIN_RETURN_IF_ERROR(RemoveStaleFiles(shape.out_dir));
  const std::string train = shape.out_dir + "/train.txt";

  GenReport report;
  report.train_rows = shape.rows;
  report.test_rows = shape.test_rows < 0 ? shape.rows / 10 : shape.test_rows;
  const bool score_train = report.test_rows == 0;
  std::vector<float> probs, labels;
  int64_t first = 0;
  for (int s = 0; s < shape.shards; ++s) {
    const int64_t count = shape.rows / shape.shards + (s < shape.rows % shape.shards);
    const std::string path = fmt::format("{}-{:05d}", train, s);
    PSTRAIN_RETURN_IF_ERROR(WriteRows(write_row, max_row_bytes,
                                      StreamSeed(shape.seed, kTrainStream), first, count, path,
                                      score_train ? &probs : nullptr, &labels));
    report.files.push_back(path);
    first += count;
  }
  if (!score_train) {
    const std::string path = shape.out_dir + "/test.txt";
    PSTRAIN_RETURN_IF_ERROR(WriteRows(write_row, max_row_bytes, StreamSeed(shape.seed, kTestStream),
                                      0, report.test_rows, path, &probs, &labels));
    report.files.push_back(path);
  }
  report.planted_auc = Auc(probs, labels);
  int64_t positives = std::count(labels.begin(), labels.end(), 1.0f);
  report.positive_rate = static_cast<double>(positives) / static_cast<double>(labels.size());
  return report;
}

}  // namespace pstrain
