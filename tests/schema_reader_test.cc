// Reading data by schema (src/data/schema_reader.h): csv and libsvm lines,
// each column kind, bad lines failing or skipped with their file:line, the
// Criteo layout read as a csv schema bit for bit, weighted ids in an
// embedding_bag, and `pstrain gen libsvm`.
#include "src/data/schema_reader.h"

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "src/common/config/config.h"
#include "src/data/batcher.h"
#include "src/data/criteo_gen.h"
#include "src/data/criteo_reader.h"
#include "src/data/dataset.h"
#include "src/data/libsvm_gen.h"
#include "src/nn/layers.h"
#include "tests/file_util.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

using testing::TempDir;

using testing::WriteFile;
using testing::WriteGz;

ColumnConfig Column(const std::string& name, ColumnType type) {
  ColumnConfig c;
  c.name = name;
  c.type = type;
  return c;
}

// label, age (standardize), count (log1p), city (categorical), items
// (multi_hot of 3, ';'), note (skip).
DataConfig CsvConfig() {
  DataConfig d;
  d.format = DataFormat::kCsv;
  d.vocab = 1000;
  d.columns.push_back(Column("y", ColumnType::kLabel));
  ColumnConfig age = Column("age", ColumnType::kDense);
  age.transform = DenseTransform::kStandardize;
  age.mean = 40;
  age.std = 10;
  age.fill = 40;
  d.columns.push_back(age);
  ColumnConfig count = Column("count", ColumnType::kDense);
  count.transform = DenseTransform::kLog1p;
  d.columns.push_back(count);
  d.columns.push_back(Column("city", ColumnType::kCategorical));
  ColumnConfig items = Column("items", ColumnType::kMultiHot);
  items.separator = ";";
  items.max_ids = 3;
  d.columns.push_back(items);
  d.columns.push_back(Column("note", ColumnType::kSkip));
  return d;
}

int64_t Hash(int field, const std::string& v, int64_t vocab) {
  return static_cast<int64_t>(CriteoHash(field, v) % static_cast<uint64_t>(vocab));
}

TEST_CASE("a csv line's columns become the label, dense features and weighted ids") {
  RowParser parser = RowParser::For(CsvConfig());
  REQUIRE(parser.dense() == 2);
  REQUIRE(parser.fields() == 4);  // city + 3 slots of items
  REQUIRE(parser.weighted());
  float label = -1, dense[2], weights[4];
  int64_t ids[4];
  REQUIRE(parser.Parse("1,50,e,paris,a;;b,anything", &label, dense, ids, weights).ok() ==
          false);  // 'e' is no number
  Status s = parser.Parse("1,50,7,paris,a;;b,anything", &label, dense, ids, weights);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(label == 1.0f);
  CHECK(dense[0] == doctest::Approx(1.0));
  CHECK(dense[1] == doctest::Approx(std::log(8.0)));
  CHECK(ids[0] == Hash(0, "paris", 1000));
  CHECK(ids[1] == Hash(1, "a", 1000));
  CHECK(ids[2] == Hash(1, "b", 1000));
  CHECK(ids[3] == Hash(1, "", 1000));  // unfilled: the column's empty value, weight 0
  CHECK(std::vector<float>(weights, weights + 4) == std::vector<float>{1, 1, 1, 0});
  // Empty cells: dense takes fill (standardized to 0), items none at all.
  REQUIRE(parser.Parse("0,,,,,", &label, dense, ids, weights).ok());
  CHECK(dense[0] == 0.0f);
  CHECK(dense[1] == 0.0f);
  CHECK(ids[0] == Hash(0, "", 1000));
  CHECK(std::vector<float>(weights, weights + 4) == std::vector<float>{1, 0, 0, 0});
  CHECK(parser.Parse("0,1,1,x,a;b;c;d,", &label, dense, ids, weights).message() ==
        "items: more than max_ids 3 values");
  CHECK(parser.Parse("0,1,1,x", &label, dense, ids, weights).message() ==
        "expected 6 comma-separated fields, got 4");
  CHECK(parser.Parse(",1,1,x,,", &label, dense, ids, weights).message() ==
        "y '': expected a number");
  CHECK(parser.Parse("1,1e40,1,x,,", &label, dense, ids, weights).message() ==
        "age '1e40': out of a float's range");
}

// Small whole numbers take log1p from a table (schema_reader.cc): the same
// bits as std::log1p, around the table's end, for fractions, negatives,
// zeros of both signs and numbers past it.
TEST_CASE("log1p of a dense cell is std::log1p of it bit for bit") {
  ColumnConfig count = Column("count", ColumnType::kDense);
  count.transform = DenseTransform::kLog1p;
  const RowParser parser(DataFormat::kCsv, {Column("y", ColumnType::kLabel), count}, ',', 10);
  std::vector<std::string> cells = {"0", "-0.0", "0.5", "-3", "1e6", "1023.5", "3e9"};
  for (int i = 0; i <= 1100; ++i) cells.push_back(std::to_string(i));
  for (const std::string& cell : cells) {
    float label = 0, dense = 0;
    REQUIRE(parser.Parse("1," + cell, &label, &dense, nullptr, nullptr).ok());
    const float expected = static_cast<float>(std::log1p(std::max(std::stod(cell), 0.0)));
    INFO(cell);
    CHECK(std::memcmp(&dense, &expected, sizeof(float)) == 0);
  }
}

TEST_CASE("a label threshold and raw ids") {
  DataConfig d = CsvConfig();
  d.columns[0].has_threshold = true;
  d.columns[0].threshold = 0;
  d.columns[3].raw_ids = true;
  RowParser parser = RowParser::For(d);
  float label = -1, dense[2], weights[4];
  int64_t ids[4];
  REQUIRE(parser.Parse("-1,1,1,999,,", &label, dense, ids, weights).ok());
  CHECK(label == 0.0f);
  CHECK(ids[0] == 999);
  REQUIRE(parser.Parse("+1,1,1,0,,", &label, dense, ids, weights).ok());
  CHECK(label == 1.0f);
  CHECK(parser.Parse("1,1,1,1000,,", &label, dense, ids, weights).message() ==
        "city id '1000': expected an integer in [0, 1000) (ids: raw)");
  CHECK(parser.Parse("1,1,1,-3,,", &label, dense, ids, weights).message() ==
        "city id '-3': expected an integer in [0, 1000) (ids: raw)");
}

DataConfig LibsvmConfig(int max_ids, bool raw) {
  DataConfig d;
  d.format = DataFormat::kLibsvm;
  d.vocab = 100;
  ColumnConfig label = Column("label", ColumnType::kLabel);
  label.has_threshold = true;
  d.columns.push_back(label);
  ColumnConfig features = Column("features", ColumnType::kMultiHot);
  features.max_ids = max_ids;
  features.raw_ids = raw;
  d.columns.push_back(features);
  return d;
}

TEST_CASE("a libsvm line's pairs are ids weighted by their values") {
  RowParser parser = RowParser::For(LibsvmConfig(4, /*raw=*/true));
  REQUIRE(parser.dense() == 0);
  REQUIRE(parser.fields() == 4);
  float label = -1, weights[4];
  int64_t ids[4];
  REQUIRE(parser.Parse("+1 0:1  7:0.5\t99:-2 ", &label, nullptr, ids, weights).ok());
  CHECK(label == 1.0f);
  CHECK(std::vector<int64_t>(ids, ids + 3) == std::vector<int64_t>{0, 7, 99});
  CHECK(std::vector<float>(weights, weights + 4) == std::vector<float>{1, 0.5f, -2, 0});
  REQUIRE(parser.Parse("-1", &label, nullptr, ids, weights).ok());
  CHECK(label == 0.0f);
  CHECK(std::vector<float>(weights, weights + 4) == std::vector<float>{0, 0, 0, 0});
  CHECK(parser.Parse("1 1:1 2:1 3:1 4:1 5:1", &label, nullptr, ids, weights).message() ==
        "more than max_ids 4 id:value pairs");
  CHECK(parser.Parse("1 3", &label, nullptr, ids, weights).message() ==
        "pair '3': expected id:value");
  CHECK(parser.Parse("1 3:x", &label, nullptr, ids, weights).message() ==
        "pair '3:x': expected id:value");
  CHECK(parser.Parse("1 100:1", &label, nullptr, ids, weights).message() ==
        "features id '100': expected an integer in [0, 100) (ids: raw)");
  CHECK(parser.Parse("one 1:1", &label, nullptr, ids, weights).message() ==
        "label 'one': expected a number");
  // Hashed ids: any text.
  RowParser hashed = RowParser::For(LibsvmConfig(2, /*raw=*/false));
  REQUIRE(hashed.Parse("1 user=7:1", &label, nullptr, ids, weights).ok());
  CHECK(ids[0] == Hash(0, "user=7", 100));
}

TEST_CASE("csv files: a header, gzip, CRLF; bad lines fail or are skipped with file:line") {
  TempDir dir;
  DataConfig d = CsvConfig();
  const std::string rows = "1,50,7,paris,a,x\n0,30,0,rome,,y\n";
  WriteFile(dir / "plain.csv", rows);
  WriteGz(dir / "gz.csv.gz", "y,age,count,city,items,note\r\n" + rows);
  Dataset plain, gz;
  REQUIRE(AppendRows(dir / "plain.csv", d, 0, &plain).ok());
  d.header = true;
  REQUIRE(AppendRows(dir / "gz.csv.gz", d, 0, &gz).ok());
  CHECK(plain.size() == 2);
  CHECK(plain.sample_shape == Shape{2});
  CHECK(plain.fields == 4);
  CHECK(gz.labels == plain.labels);
  CHECK(gz.dense == plain.dense);
  CHECK(gz.sparse == plain.sparse);
  CHECK(gz.weights == plain.weights);
  CHECK(plain.weights.size() == 8);

  d.header = false;
  const std::string bad = "1,50,7,paris,a,x\n1,fifty,7,paris,a,x\n0,30,0,rome,,y\n1,2\n";
  WriteFile(dir / "bad.csv", bad);
  Dataset failed;
  CHECK(AppendRows(dir / "bad.csv", d, 0, &failed).message() ==
        dir / "bad.csv" + ": line 2 (offset 17): age 'fifty': expected a number");
  d.on_bad_row = OnBadRow::kSkip;
  Dataset skipped;
  REQUIRE(AppendRows(dir / "bad.csv", d, 0, &skipped).ok());
  CHECK(skipped.size() == 2);
  CHECK(skipped.labels == std::vector<float>{1, 0});
  CHECK(skipped.sparse.size() == 8);
  CHECK(skipped.weights.size() == 8);
  CHECK(skipped.skipped_rows == 2);
  REQUIRE(skipped.skipped_examples.size() == 2);
  CHECK(skipped.skipped_examples[1] ==
        dir / "bad.csv" + ": line 4 (offset 52): expected 6 comma-separated fields, got 2");
}

// Generated Criteo rows in `dir`, `shards` training files, and the config
// that reads them.
DataConfig SmallCriteo(const TempDir& dir, int64_t rows, int shards) {
  GenOptions gen;
  gen.rows = rows;
  gen.shards = shards;
  gen.test_rows = 0;
  gen.out_dir = dir.path();
  gen.min_categories = 50;
  gen.max_categories = 500;
  REQUIRE(GenerateCriteo(gen).ok());
  DataConfig criteo;
  criteo.format = DataFormat::kCriteo;
  criteo.vocab = 4096;
  criteo.train = {dir / "train.txt"};
  return criteo;
}

TEST_CASE("the Criteo files read as a csv schema give bit-identical batches") {
  TempDir dir;
  const DataConfig criteo = SmallCriteo(dir, 3000, 2);
  DataConfig csv = criteo;
  csv.format = DataFormat::kCsv;
  csv.delimiter = "\t";
  csv.columns.push_back(Column("click", ColumnType::kLabel));
  for (int j = 0; j < kCriteoDense; ++j) {
    ColumnConfig c = Column("int" + std::to_string(j), ColumnType::kDense);
    c.transform = DenseTransform::kLog1p;
    csv.columns.push_back(c);
  }
  for (int f = 0; f < kCriteoCategorical; ++f)
    csv.columns.push_back(Column("cat" + std::to_string(f), ColumnType::kCategorical));
  for (int rank = 0; rank < 2; ++rank) {
    auto a = LoadTrainShard(criteo, rank, 2);
    auto b = LoadTrainShard(csv, rank, 2);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    REQUIRE(a->size() == 1500);
    CHECK(b->sample_shape == a->sample_shape);
    CHECK(b->fields == a->fields);
    CHECK(b->weights.empty());
    Batcher ba = Batcher::ForTraining(&*a, 64, rank, 2, /*seed=*/7, /*shuffle=*/true);
    Batcher bb = Batcher::ForTraining(&*b, 64, rank, 2, /*seed=*/7, /*shuffle=*/true);
    ba.StartEpoch(1);
    bb.StartEpoch(1);
    Batch x, y;
    int batches = 0;
    while (ba.Next(&x)) {
      REQUIRE(bb.Next(&y));
      ++batches;
      REQUIRE(x.dense.data.size() == y.dense.data.size());
      CHECK(std::memcmp(x.dense.ptr(), y.dense.ptr(), x.dense.data.size() * sizeof(float)) == 0);
      CHECK(x.sparse == y.sparse);
      CHECK(std::memcmp(x.labels.data(), y.labels.data(), x.labels.size() * sizeof(float)) == 0);
      CHECK(y.sparse_weights.empty());
    }
    CHECK_FALSE(bb.Next(&y));
    CHECK(batches == 1500 / 64);
  }
}

// An embedding_bag over weighted ids: each row scaled by its weight; mean
// divides by the weights' sum; the gradient scaled the same way.
TEST_CASE("embedding_bag weighs each id by its weight, forward and backward") {
  for (const char* mode : {"sum", "mean", "concat"}) {
    CAPTURE(mode);
    LayerConfig c;
    c.type = LayerType::kEmbeddingBag;
    c.name = "emb";
    c.vocab = 4;
    c.dim = 2;
    c.mode = mode;
    auto layer = CreateLayer(c, LayerContext{});
    REQUIRE(layer.ok());
    REQUIRE((*layer)->Build(Shape{3}, 1).ok());
    Param* w = (*layer)->Params()[0];
    for (int64_t i = 0; i < 8; ++i)
      w->value.ptr()[i] = static_cast<float>(i + 1);  // row r: 2r+1, 2r+2
    Batch batch;
    batch.fields = 3;
    batch.sparse = {1, 3, 0};
    batch.sparse_weights = {0.5f, 2, 0};
    Tensor in, out;
    in.Resize({1, 3});
    (*layer)->Forward(batch, in, &out, true);
    const bool concat = std::string(mode) == "concat";
    const float scale = std::string(mode) == "mean" ? 1 / 2.5f : 1;
    if (concat) {
      CHECK(std::vector<float>(out.data.begin(), out.data.end()) ==
            std::vector<float>{1.5f, 2, 14, 16, 0, 0});
    } else {
      CHECK(out.data[0] == doctest::Approx((0.5 * 3 + 2 * 7) * scale));
      CHECK(out.data[1] == doctest::Approx((0.5 * 4 + 2 * 8) * scale));
    }
    Tensor dout;
    dout.Resize(out.shape);
    for (size_t i = 0; i < dout.data.size(); ++i) dout.data[i] = 1;
    (*layer)->Backward(batch, in, out, dout, nullptr);
    const float* g = w->grad.ptr();
    CHECK(g[2] == doctest::Approx(0.5 * scale));  // row 1
    CHECK(g[6] == doctest::Approx(2 * scale));    // row 3
    CHECK(g[0] == 0.0f);                          // row 0: weight 0
  }
}

// The held-out share of train: every worker leaves out the same samples,
// the validation set is exactly them, from every shard.
TEST_CASE("validation_fraction holds out the same samples on every worker") {
  TempDir dir;
  DataConfig d = SmallCriteo(dir, 4000, 3);
  d.validation_fraction = 0.2f;
  d.validation_seed = 5;
  auto held = LoadValidation(d);
  REQUIRE(held.ok());
  CHECK(held->size() > 650);
  CHECK(held->size() < 950);
  int64_t trained = 0;
  for (int rank = 0; rank < 2; ++rank) {
    auto mine = LoadTrainShard(d, rank, 2);
    REQUIRE(mine.ok());
    trained += mine->size();
  }
  CHECK(trained + held->size() == 4000);
  // Every sample, by its dense and sparse features, is in exactly one of them.
  DataConfig all = d;
  all.validation_fraction = 0;
  auto whole = LoadTrainShard(all, 0, 1);
  REQUIRE(whole.ok());
  auto key = [](const Dataset& x, int64_t s) {
    return std::vector<int64_t>(x.sparse.begin() + s * x.fields,
                                x.sparse.begin() + (s + 1) * x.fields);
  };
  std::multiset<std::vector<int64_t>> rest;
  for (int64_t s = 0; s < whole->size(); ++s) rest.insert(key(*whole, s));
  for (int64_t s = 0; s < held->size(); ++s) {
    auto it = rest.find(key(*held, s));
    REQUIRE(it != rest.end());
    rest.erase(it);
  }
  CHECK(static_cast<int64_t>(rest.size()) == trained);
  // Another seed holds out others.
  d.validation_seed = 6;
  auto other = LoadValidation(d);
  REQUIRE(other.ok());
  CHECK(other->sparse != held->sparse);
}

TEST_CASE("gen libsvm writes planted-model data the libsvm schema reads") {
  TempDir dir;
  LibsvmGenOptions o;
  o.rows = 2000;
  o.shards = 2;
  o.test_rows = 500;
  o.out_dir = dir.path();
  o.features = 1000;
  auto report = GenerateLibsvm(o);
  REQUIRE(report.ok());
  CHECK(report->files.size() == 3);
  CHECK(report->planted_auc > 0.7);
  CHECK(report->positive_rate > 0.15);
  CHECK(report->positive_rate < 0.35);
  DataConfig d = LibsvmConfig(o.max_active + 1, /*raw=*/true);
  d.vocab = o.features + 1;
  d.train = {dir / "train.txt"};
  d.test = {dir / "test.txt"};
  auto train = LoadTrainShard(d, 0, 1);
  REQUIRE_MESSAGE(train.ok(), train.status().ToString());
  CHECK(train->size() == 2000);
  for (int64_t s = 0; s < train->size(); ++s) {
    REQUIRE(train->sparse[s * train->fields] == 0);  // the constant feature
    REQUIRE(train->weights[s * train->fields] == 1.0f);
  }
  // The same options give the same files.
  const std::string first = [&] {
    std::ifstream in(dir / "test.txt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  REQUIRE(GenerateLibsvm(o).ok());
  std::ifstream again(dir / "test.txt");
  CHECK(std::string(std::istreambuf_iterator<char>(again), {}) == first);
}

}  // namespace
}  // namespace pstrain
