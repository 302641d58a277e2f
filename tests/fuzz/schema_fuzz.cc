// The schema readers (src/data/schema_reader.h) fed an arbitrary file, raw or
// gzip (seeds: corpus/schema_fuzz/). The input's first byte picks the
// schema: a csv one with every column kind, a tab-separated one with a
// header and raw ids, or libsvm with raw or hashed ids; whether bad lines
// fail or are skipped; whether only the first 2 samples are read. Beyond
// the sanitizers: what loads has as many features, ids and weights as
// samples, finite dense features, labels and weights, 0/1 labels where a
// threshold makes them, ids in [0, vocab) (a column's own vocab where it
// has one, as a column that names its tables does); skipped lines only
// when asked.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/data/schema_reader.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace pstrain;

constexpr int64_t kVocab = 1000;
// The rows of the table the csv schemas' city column names (table:).
constexpr int64_t kCityVocab = 50;

ColumnConfig Column(const char* name, ColumnType type) {
  ColumnConfig c;
  c.name = name;
  c.type = type;
  return c;
}

DataConfig Schema(int which) {
  DataConfig d;
  d.vocab = kVocab;
  ColumnConfig label = Column("y", ColumnType::kLabel);
  ColumnConfig items = Column("items", ColumnType::kMultiHot);
  items.max_ids = 3;
  items.separator = ";";
  switch (which) {
    case 0: {
      d.format = DataFormat::kCsv;
      label.has_threshold = true;
      d.columns.push_back(label);
      ColumnConfig age = Column("age", ColumnType::kDense);
      age.transform = DenseTransform::kStandardize;
      age.mean = 1;
      age.std = 0.001f;
      d.columns.push_back(age);
      ColumnConfig count = Column("count", ColumnType::kDense);
      count.transform = DenseTransform::kLog1p;
      d.columns.push_back(count);
      ColumnConfig city = Column("city", ColumnType::kCategorical);
      city.vocab = kCityVocab;
      d.columns.push_back(city);
      d.columns.push_back(items);
      d.columns.push_back(Column("note", ColumnType::kSkip));
      break;
    }
    case 1: {
      d.format = DataFormat::kCsv;
      d.delimiter = "\t";
      d.header = true;
      d.columns.push_back(label);
      d.columns.push_back(Column("x", ColumnType::kDense));
      ColumnConfig city = Column("city", ColumnType::kCategorical);
      city.raw_ids = true;
      city.vocab = kCityVocab;
      d.columns.push_back(city);
      items.raw_ids = true;
      items.separator = "||";
      d.columns.push_back(items);
      break;
    }
    default: {
      d.format = DataFormat::kLibsvm;
      label.has_threshold = which == 2;
      d.columns.push_back(label);
      items.max_ids = 4;
      items.separator = "|";
      items.raw_ids = which == 2;
      d.columns.push_back(items);
      break;
    }
  }
  return d;
}

void Check(const DataConfig& config, const Dataset& d, int64_t max_samples) {
  using fuzz::Fail;
  RowParser parser = RowParser::For(config);
  const size_t n = static_cast<size_t>(d.size());
  if (d.dense.size() != n * parser.dense() || d.sparse.size() != n * parser.fields() ||
      d.weights.size() != (parser.weighted() ? n * parser.fields() : 0))
    Fail("features, ids or weights do not match the number of samples");
  if (max_samples > 0 && d.size() > max_samples) Fail("more samples than asked for");
  for (float x : d.dense)
    if (!std::isfinite(x)) Fail("a dense feature is not finite");
  for (float w : d.weights)
    if (!std::isfinite(w)) Fail("a weight is not finite");
  for (int64_t id : d.sparse)
    if (id < 0 || id >= kVocab) Fail("an id outside [0, vocab)");
  // The csv schemas' first id slot is city's.
  for (size_t s = 0; config.format == DataFormat::kCsv && s < n; ++s)
    if (d.sparse[s * parser.fields()] >= kCityVocab) Fail("a city id outside its table's vocab");
  for (float y : d.labels) {
    if (!std::isfinite(y)) Fail("a label is not finite");
    if (config.columns[0].has_threshold && y != 0 && y != 1) Fail("a thresholded label not 0/1");
  }
  if (config.on_bad_row == OnBadRow::kFail && d.skipped_rows != 0) Fail("skipped a line");
  if (d.skipped_examples.size() > 5 ||
      d.skipped_examples.size() > static_cast<size_t>(d.skipped_rows))
    Fail("named more skipped lines than allowed or skipped");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::ScratchFiles scratch;
  static const std::string path = [] {
    std::string p = fuzz::ScratchPath("schema");
    scratch.Add(p);
    return p;
  }();
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  DataConfig config = Schema(pick % 4);
  if (pick & 4) config.on_bad_row = OnBadRow::kSkip;
  const int64_t max_samples = pick & 8 ? 2 : 0;
  fuzz::WriteScratch(path, data + 1, size - 1);
  Dataset d;
  if (AppendRows(path, config, max_samples, &d).ok()) Check(config, d, max_samples);
  return 0;
}
