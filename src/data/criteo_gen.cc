#include "src/data/criteo_gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "src/common/random.h"
#include "src/data/criteo_reader.h"

namespace pstrain {
namespace {

constexpr int kPilotRows = 8192;
constexpr size_t kGuideSize = 4096;
constexpr size_t kMaxRowBytes = 1024;
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
    // The bias that makes the mean probability on pilot rows click_rate.
    Rng pilot(StreamSeed(o.seed, kPilotStream));
    std::vector<double> logits(kPilotRows);
    for (double& l : logits) l = Draw(&pilot).logit;
    bias_ = BiasFor(logits, o.click_rate);
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

Status CheckOptions(const GenOptions& o) {
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

}  // namespace

StatusOr<GenReport> GenerateCriteo(const GenOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(CheckOptions(options));
  const PlantedModel model(options);
  return WriteDataSet(options, kMaxRowBytes, [&](Rng* rng, char* p, double* prob, bool* label) {
    const Row row = model.Draw(rng);
    *prob = model.Probability(row);
    *label = rng->Uniform() < *prob;
    return FormatRow(model, row, *label, p);
  });
}

}  // namespace pstrain
