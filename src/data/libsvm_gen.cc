#include "src/data/libsvm_gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "src/common/random.h"

namespace pstrain {
namespace {

constexpr int kPilotRows = 8192;
constexpr double kHeadIds = 100;  // ids up to about this rank keep their full weight
constexpr int kMaxActive = 10000;
constexpr size_t kBytesPerPair = 24;  // "id:value " at most: 20 + 1 + 5 digits' worth

struct Pair {
  int64_t id;
  int milli;  // the value times 1000
};

class PlantedSparseModel {
 public:
  explicit PlantedSparseModel(const LibsvmGenOptions& o) : options_(o) {
    Rng rng(StreamSeed(o.seed, kModelStream));
    const auto n = static_cast<size_t>(o.features);
    cdf_.resize(n);
    weights_.resize(n + 1);
    double sum = 0;
    for (size_t k = 0; k < n; ++k) {
      cdf_[k] = sum += std::pow(static_cast<double>(k + 1), -o.zipf);
      weights_[k + 1] =
          o.weight_std * rng.Normal() / std::sqrt(1.0 + static_cast<double>(k) / kHeadIds);
    }
    Rng pilot(StreamSeed(o.seed, kPilotStream));
    std::vector<double> logits(kPilotRows);
    std::vector<Pair> pairs;
    for (double& l : logits) l = Draw(&pilot, &pairs);
    weights_[0] = BiasFor(logits, o.click_rate);
  }

  // The row's pairs (without id 0) in ascending id order; returns the logit
  // without the bias.
  double Draw(Rng* rng, std::vector<Pair>* pairs) const {
    const int span = options_.max_active - options_.min_active + 1;
    const int active = options_.min_active + static_cast<int>(rng->Below(span));
    pairs->clear();
    for (int i = 0; i < active; ++i) {
      const double u = rng->Uniform() * cdf_.back();
      const auto k =
          static_cast<int64_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
      const int milli = rng->Uniform() < 0.5 ? 1000 : 100 + static_cast<int>(rng->Below(1901));
      pairs->push_back({std::min<int64_t>(k, options_.features - 1) + 1, milli});
    }
    std::sort(pairs->begin(), pairs->end(),
              [](const Pair& a, const Pair& b) { return a.id < b.id; });
    pairs->erase(std::unique(pairs->begin(), pairs->end(),
                             [](const Pair& a, const Pair& b) { return a.id == b.id; }),
                 pairs->end());
    double logit = 0;
    for (const Pair& p : *pairs) logit += weights_[p.id] * (p.milli / 1000.0);
    return logit;
  }

  double bias() const { return weights_[0]; }

 private:
  const LibsvmGenOptions& options_;
  std::vector<double> cdf_;
  std::vector<double> weights_;  // by id; [0] is the bias
};

char* FormatValue(int milli, char* p) {
  p = std::to_chars(p, p + 8, milli / 1000).ptr;
  if (milli % 1000 == 0) return p;
  *p++ = '.';
  const int frac = milli % 1000;
  *p++ = static_cast<char>('0' + frac / 100);
  *p++ = static_cast<char>('0' + frac / 10 % 10);
  *p++ = static_cast<char>('0' + frac % 10);
  return p;
}

Status CheckOptions(const LibsvmGenOptions& o) {
  if (o.features < 1 || o.features > (int64_t{1} << 26))
    return InvalidArgument(fmt::format("features {}: expected 1..2^26", o.features));
  if (o.min_active < 1 || o.max_active < o.min_active || o.max_active > kMaxActive)
    return InvalidArgument(fmt::format("active ids {}..{}: expected 1 <= min <= max <= {}",
                                       o.min_active, o.max_active, kMaxActive));
  if (!(o.zipf > 0 && o.zipf < 10))
    return InvalidArgument(fmt::format("zipf {}: expected 0 < z < 10", o.zipf));
  if (!(o.click_rate > 0 && o.click_rate < 1))
    return InvalidArgument(fmt::format("click rate {}: expected 0 < r < 1", o.click_rate));
  return Status::OK();
}

}  // namespace

StatusOr<GenReport> GenerateLibsvm(const LibsvmGenOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(CheckOptions(options));
  const PlantedSparseModel model(options);
  std::vector<Pair> pairs;
  const size_t max_row_bytes = (options.max_active + 2) * kBytesPerPair;
  return WriteDataSet(options, max_row_bytes, [&](Rng* rng, char* p, double* prob, bool* label) {
    const double logit = model.bias() + model.Draw(rng, &pairs);
    *prob = 1 / (1 + std::exp(-logit));
    *label = rng->Uniform() < *prob;
    for (char c : std::string_view(*label ? "+1 0:1" : "-1 0:1")) *p++ = c;
    for (const Pair& pair : pairs) {
      *p++ = ' ';
      p = std::to_chars(p, p + 20, pair.id).ptr;
      *p++ = ':';
      p = FormatValue(pair.milli, p);
    }
    *p++ = '\n';
    return p;
  });
}

}  // namespace pstrain
