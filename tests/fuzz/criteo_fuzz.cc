// The Criteo reader fed an arbitrary file, raw or gzip (seeds: lines in the
// Criteo layout, corpus/criteo_fuzz/), read whole or only its first samples.
// Beyond the sanitizers: a file that loads gives 13 finite dense features, 26
// ids in [0, vocab) and a 0/1 label per sample.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/data/criteo_reader.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

constexpr int64_t kVocab = 1000;

void Check(const pstrain::Dataset& d) {
  using pstrain::fuzz::Fail;
  const size_t n = static_cast<size_t>(d.size());
  if (d.dense.size() != n * pstrain::kCriteoDense ||
      d.sparse.size() != n * pstrain::kCriteoCategorical)
    Fail("features do not match the number of samples");
  for (float x : d.dense)
    if (!std::isfinite(x)) Fail("a dense feature is not finite");
  for (int64_t id : d.sparse)
    if (id < 0 || id >= kVocab) Fail("an id outside [0, vocab)");
  for (float y : d.labels)
    if (y != 0 && y != 1) Fail("a label that is not 0 or 1");
  if (!d.weights.empty()) Fail("weights for ids that all weigh 1");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  static fuzz::ScratchFiles scratch;
  static const std::string path = [] {
    std::string p = fuzz::ScratchPath("criteo");
    scratch.Add(p);
    return p;
  }();
  fuzz::WriteScratch(path, data, size);
  // One read per input (the reader's 4 MiB buffer is most of a run's cost):
  // every fourth input only up to 2 samples.
  const int64_t max_samples = size > 0 && data[size - 1] % 4 == 0 ? 2 : 0;
  Dataset d;
  if (AppendCriteo(path, kVocab, max_samples, &d).ok()) {
    Check(d);
    if (max_samples > 0 && d.size() > max_samples) fuzz::Fail("more samples than asked for");
  }
  return 0;
}
