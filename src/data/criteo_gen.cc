#include "src/data/criteo_gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

#include "src/common/random.h"
#include "src/data/criteo_reader.h"
#include "src/data/dataset.h"
#include "src/data/metrics.h"

namespace pstrain {
namespace {

// Streams of the seed: the model, the bias estimate, train rows, test rows.
enum Stream : uint64_t { kModelStream = 0, kPilotStream, kTrainStream, kTestStream };
constexpr int kPilotRows = 8192;
constexpr size_t kGuideSize = 4096;
constexpr size_t kFlushBytes = 4 << 20;
// Means of the integer features (exponential counts), loosely like Criteo's.
constexpr double kDenseMean[kCriteoDense] = {3, 100, 20, 7, 15000, 100, 15, 12, 100, 1, 3, 1, 10};

// MurmurHash3's finalizer: a bijection on 32 bits, so distinct categories of
// a field get distinct hex values.
uint32_t Mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bU;
  h ^= h >> 13;
  h *= 0xc2b2ae35U;
  return h ^ (h >> 16);
}

struct CategoricalField {
  std::vector<double> cdf;  // cumulative Zipf weights by rank
  // guide[g]: the first rank whose cdf exceeds g / kGuideSize of the total,
  // so a draw searches only between two guide entries (most draws fall in
  // the head, where those are close).
  std::vector<uint32_t> guide;
  std::vector<float> weights;  // w_f by rank
  float missing_weight = 0;
  double missing_rate = 0;
  uint32_t salt = 0;  // makes the hex values differ between fields
};

struct DenseField {
  double missing_rate = 0;
  double weight = 0;  // v_j
};

// One drawn row before formatting: -1 marks an empty value.
struct Row {
  int64_t dense[kCriteoDense];
  int64_t category[kCriteoCategorical];
  double logit = 0;  // without the bias
};

// Values up to about this rank keep their full weight (see PlantedModel).
constexpr double kHeadValues = 100;

class PlantedModel {
 public:
  explicit PlantedModel(const GenOptions& o) {
    Rng rng(StreamSeed(o.seed, kModelStream));
    const double spread = std::log(static_cast<double>(o.max_categories) / o.min_categories);
    for (int f = 0; f < kCriteoCategorical; ++f) {
      CategoricalField& c = cat_[f];
      // Field sizes spread geometrically over [min, max], in a scrambled order.
      const double at = ((f * 7) % kCriteoCategorical) / double{kCriteoCategorical - 1};
      const auto n = static_cast<size_t>(std::llround(o.min_categories * std::exp(at * spread)));
      c.cdf.resize(n);
      double sum = 0;
      for (size_t k = 0; k < n; ++k) c.cdf[k] = sum += std::pow(double(k + 1), -o.zipf);
      c.guide.resize(kGuideSize + 1);
      for (size_t g = 0, k = 0; g <= kGuideSize; ++g) {
        while (k + 1 < n && c.cdf[k] <= sum * g / kGuideSize) ++k;
        c.guide[g] = static_cast<uint32_t>(k);
      }
      const double scale = o.weight_std * (0.25 + 1.5 * rng.Uniform());
      // A value's effect shrinks with its rank: frequent values carry the
      // signal, the long tail little each (as in real click logs). Otherwise
      // the planted AUC would rest on values seen a handful of times, which
      // no model can learn from any amount of data this generator writes.
      c.weights.resize(n);
      for (size_t k = 0; k < n; ++k)
        c.weights[k] = static_cast<float>(scale * rng.Normal() /
                                          std::sqrt(1.0 + static_cast<double>(k) / kHeadValues));
      c.missing_weight = static_cast<float>(scale * rng.Normal());
      c.missing_rate = rng.Uniform() < 0.3 ? 0.4 * rng.Uniform() : 0.0;
      c.salt = static_cast<uint32_t>(rng.Next());
    }
    for (DenseField& d : dense_) {
      d.missing_rate = rng.Uniform() < 0.5 ? 0.5 * rng.Uniform() : 0.0;
      d.weight = o.dense_weight_std * rng.Normal();
    }
    // The bias that makes the mean probability on pilot rows click_rate
    // (bisection: the mean is increasing in the bias).
    Rng pilot(StreamSeed(o.seed, kPilotStream));
    std::vector<double> logits(kPilotRows);
    for (double& l : logits) l = Draw(&pilot).logit;
    double lo = -30, hi = 30;
    for (int i = 0; i < 60; ++i) {
      bias_ = (lo + hi) / 2;
      double mean = 0;
      for (double l : logits) mean += 1 / (1 + std::exp(-(bias_ + l)));
      (mean / kPilotRows < o.click_rate ? lo : hi) = bias_;
    }
  }

  Row Draw(Rng* rng) const {
    Row row;
    double logit = 0;
    for (int j = 0; j < kCriteoDense; ++j) {
      int64_t x = -1;
      if (rng->Uniform() >= dense_[j].missing_rate) {
        x = static_cast<int64_t>(-kDenseMean[j] * std::log(1 - rng->Uniform()));
        logit += dense_[j].weight * std::log1p(static_cast<double>(x));
      }
      row.dense[j] = x;
    }
    for (int f = 0; f < kCriteoCategorical; ++f) {
      const CategoricalField& c = cat_[f];
      if (rng->Uniform() < c.missing_rate) {
        row.category[f] = -1;
        logit += c.missing_weight;
        continue;
      }
      const double r = rng->Uniform();
      const double u = r * c.cdf.back();
      const size_t g = static_cast<size_t>(r * kGuideSize);
      const auto first = c.cdf.begin() + c.guide[g], last = c.cdf.begin() + c.guide[g + 1];
      const size_t k = std::upper_bound(first, last, u) - c.cdf.begin();
      row.category[f] = static_cast<int64_t>(k);
      logit += c.weights[k];
    }
    row.logit = logit;
    return row;
  }

  double Probability(const Row& row) const { return 1 / (1 + std::exp(-(bias_ + row.logit))); }
  uint32_t HexValue(int f, int64_t k) const {
    return Mix32(static_cast<uint32_t>(k) ^ cat_[f].salt);
  }

 private:
  CategoricalField cat_[kCriteoCategorical];
  DenseField dense_[kCriteoDense];
  double bias_ = 0;
};

// Appends one TSV line; `buf` must have room for it (under 512 bytes).
char* FormatRow(const PlantedModel& model, const Row& row, bool label, char* p) {
  static constexpr char kHex[] = "0123456789abcdef";
  *p++ = label ? '1' : '0';
  for (int64_t x : row.dense) {
    *p++ = '\t';
    if (x >= 0) p = std::to_chars(p, p + 24, x).ptr;
  }
  for (int f = 0; f < kCriteoCategorical; ++f) {
    *p++ = '\t';
    if (row.category[f] < 0) continue;
    const uint32_t v = model.HexValue(f, row.category[f]);
    for (int shift = 28; shift >= 0; shift -= 4) *p++ = kHex[(v >> shift) & 0xf];
  }
  *p++ = '\n';
  return p;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

Status IoError(const std::string& path, const char* op) {
  return Internal(fmt::format("{}: {}: {}", path, op, std::strerror(errno)));
}

// Writes rows [first, first + count) of `stream` to `path`; collects the
// planted probabilities and labels when `probs` is set.
Status WriteRows(const PlantedModel& model, uint64_t stream_seed, int64_t first, int64_t count,
                 const std::string& path, std::vector<float>* probs, std::vector<float>* labels) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (!file) return IoError(path, "open");
  std::vector<char> buf(kFlushBytes + 1024);
  char* p = buf.data();
  for (int64_t i = first; i < first + count; ++i) {
    Rng rng(StreamSeed(stream_seed, static_cast<uint64_t>(i)));
    const Row row = model.Draw(&rng);
    const double prob = model.Probability(row);
    const bool label = rng.Uniform() < prob;
    p = FormatRow(model, row, label, p);
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

Status CheckOptions(const GenOptions& o) {
  if (o.rows <= 0) return InvalidArgument(fmt::format("rows {}: expected > 0", o.rows));
  if (o.shards < 1 || o.shards > 100000 || o.shards > o.rows) {
    return InvalidArgument(fmt::format("shards {}: expected 1..min(rows, 100000)", o.shards));
  }
  if (o.test_rows < -1)
    return InvalidArgument(fmt::format("test rows {}: expected >= 0", o.test_rows));
  if (o.out_dir.empty()) return InvalidArgument("no output directory");
  if (!(o.zipf > 0 && o.zipf < 10))
    return InvalidArgument(fmt::format("zipf {}: expected 0 < z < 10", o.zipf));
  if (o.min_categories < 1 || o.max_categories < o.min_categories || o.max_categories > (1 << 26)) {
    return InvalidArgument(fmt::format("categories {}..{}: expected 1 <= min <= max <= 2^26",
                                       o.min_categories, o.max_categories));
  }
  if (!(o.click_rate > 0 && o.click_rate < 1)) {
    return InvalidArgument(fmt::format("click rate {}: expected 0 < r < 1", o.click_rate));
  }
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

StatusOr<GenReport> GenerateCriteo(const GenOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(CheckOptions(options));
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec) return Internal(fmt::format("{}: create directory: {}", options.out_dir, ec.message()));
  PSTRAIN_RETURN_IF_ERROR(RemoveStaleFiles(options.out_dir));
  const std::string train = options.out_dir + "/train.txt";

  const PlantedModel model(options);
  GenReport report;
  report.train_rows = options.rows;
  report.test_rows = options.test_rows < 0 ? options.rows / 10 : options.test_rows;
  const bool score_train = report.test_rows == 0;
  std::vector<float> probs, labels;
  int64_t first = 0;
  for (int s = 0; s < options.shards; ++s) {
    const int64_t count = options.rows / options.shards + (s < options.rows % options.shards);
    const std::string path = fmt::format("{}-{:05d}", train, s);
    PSTRAIN_RETURN_IF_ERROR(WriteRows(model, StreamSeed(options.seed, kTrainStream), first, count,
                                      path, score_train ? &probs : nullptr, &labels));
    report.files.push_back(path);
    first += count;
  }
  if (!score_train) {
    const std::string path = options.out_dir + "/test.txt";
    PSTRAIN_RETURN_IF_ERROR(WriteRows(model, StreamSeed(options.seed, kTestStream), 0,
                                      report.test_rows, path, &probs, &labels));
    report.files.push_back(path);
  }
  report.planted_auc = Auc(probs, labels);
  int64_t positives = std::count(labels.begin(), labels.end(), 1.0f);
  report.positive_rate = static_cast<double>(positives) / static_cast<double>(labels.size());
  return report;
}

}  // namespace pstrain
