// The data layer's readers: IDX and Criteo (values and the file:line:offset
// of every error), sharding by file, and the synthetic Criteo generator.
// Batching and metrics are in batcher_test.cc.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/data/batcher.h"
#include "src/data/criteo_gen.h"
#include "src/data/criteo_reader.h"
#include "src/data/dataset.h"
#include "src/data/gen_cli.h"
#include "src/data/idx_reader.h"
#include "src/data/metrics.h"
#include "src/data/prefetcher.h"
#include "src/data/schema_reader.h"
#include "tests/file_util.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// The case that reads the real data set: CTest skips it where it is missing.
constexpr char kFashionMnist[] = "data_fashion_mnist";
const bool kSuiteRegistered = testing::SuiteNeeds(kFashionMnist, testing::FashionMnistInstalled);

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// One line of the criteo layout through its schema preset.
Status ParseCriteoLine(std::string_view line, int64_t vocab, float* label, float* dense,
                       int64_t* ids) {
  DataConfig config;
  config.format = DataFormat::kCriteo;
  config.vocab = vocab;
  return RowParser::For(config).Parse(line, label, dense, ids, nullptr);
}

// A fresh directory under the temp directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> next{0};
    path_ = (fs::temp_directory_path() /
             ("pstrain_data_test_" + std::to_string(getpid()) + "_" + std::to_string(next++)))
                .string();
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using testing::WriteFile;
using testing::WriteGz;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string IdxImages(uint32_t n, uint32_t rows, uint32_t cols, const std::string& pixels) {
  return BigEndian32(kIdxImagesMagic) + BigEndian32(n) + BigEndian32(rows) + BigEndian32(cols) +
         pixels;
}

std::string IdxLabels(const std::string& labels) {
  return BigEndian32(kIdxLabelsMagic) + BigEndian32(static_cast<uint32_t>(labels.size())) + labels;
}

// ---------------------------------------------------------------- IDX

TEST_CASE("Fashion-MNIST's test set loads with the right shape, labels and pixel range" *
          doctest::test_suite(kFashionMnist)) {
  const std::string dir = testing::kFashionMnistDir;
  const std::string images = dir + "t10k-images-idx3-ubyte.gz";
  const std::string labels = dir + "t10k-labels-idx1-ubyte.gz";
  auto data = LoadIdx(images, labels);
  INFO(data.status().ToString());
  REQUIRE(data.ok());
  CHECK(data->size() == 10000);
  CHECK(data->sample_shape == Shape{1, 28, 28});
  CHECK(data->dense.size() == 10000u * 28 * 28);
  CHECK(data->fields == 0);
  std::vector<int> per_class(10, 0);
  for (float l : data->labels) {
    REQUIRE(l >= 0);
    REQUIRE(l <= 9);
    per_class[static_cast<int>(l)]++;
  }
  for (int c = 0; c < 10; ++c) CHECK(per_class[c] == 1000);  // the test set is balanced
  auto [lo, hi] = std::minmax_element(data->dense.begin(), data->dense.end());
  CHECK(*lo == 0.0f);
  CHECK(*hi == 1.0f);
}

TEST_CASE("a synthetic IDX pair round-trips, gzip-compressed and raw") {
  TempDir dir;
  std::string pixels;
  for (int i = 0; i < 3 * 2 * 4; ++i) pixels.push_back(static_cast<char>(i * 11));
  const std::string images = IdxImages(3, 2, 4, pixels), labels = IdxLabels({7, 0, 9});
  for (bool gz : {true, false}) {
    CAPTURE(gz);
    const std::string ipath = dir.File(gz ? "i.gz" : "i"), lpath = dir.File(gz ? "l.gz" : "l");
    if (gz) {
      WriteGz(ipath, images);
      WriteGz(lpath, labels);
    } else {
      WriteFile(ipath, images);
      WriteFile(lpath, labels);
    }
    auto data = LoadIdx(ipath, lpath);
    INFO(data.status().ToString());
    REQUIRE(data.ok());
    CHECK(data->sample_shape == Shape{1, 2, 4});
    CHECK(data->labels == std::vector<float>{7, 0, 9});
    REQUIRE(data->dense.size() == 24);
    for (int i = 0; i < 24; ++i) CHECK(data->dense[i] == doctest::Approx(i * 11 / 255.0));
  }
}

TEST_CASE("IDX errors name the file and the byte offset") {
  TempDir dir;
  const std::string images = dir.File("images"), labels = dir.File("labels");
  WriteFile(labels, IdxLabels({1, 2, 3}));

  SUBCASE("pixels cut short") {
    WriteFile(images, IdxImages(3, 2, 4, std::string(10, '\1')));
    auto data = LoadIdx(images, labels);
    REQUIRE_FALSE(data.ok());
    CHECK(data.status().message() ==
          images + ": truncated at offset 26: expected 24 bytes of pixels");
  }
  SUBCASE("a gzip stream cut short") {
    WriteGz(images, IdxImages(3, 2, 4, std::string(24, '\1')));
    std::string gz = ReadFile(images);
    WriteFile(images, gz.substr(0, gz.size() - 12));  // drop part of the deflate data and trailer
    auto data = LoadIdx(images, labels);
    REQUIRE_FALSE(data.ok());
    CHECK(Contains(data.status().message(), images + ": "));
    CHECK(Contains(data.status().message(), " at offset "));
  }
  SUBCASE("header cut short") {
    WriteFile(images, BigEndian32(kIdxImagesMagic) + BigEndian32(3) + "\0\0"s);
    auto data = LoadIdx(images, labels);
    REQUIRE_FALSE(data.ok());
    CHECK(data.status().message() ==
          images + ": truncated at offset 10: expected 16 bytes of header");
  }
  SUBCASE("bad magic: the label file given as images") {
    auto data = LoadIdx(labels, labels);
    REQUIRE_FALSE(data.ok());
    CHECK(data.status().message() ==
          labels + ": bad magic 0x00000801 at offset 0: expected 0x00000803");
  }
  SUBCASE("a label out of range") {
    WriteFile(images, IdxImages(3, 1, 1, "abc"));
    WriteFile(labels, IdxLabels({1, 12, 3}));
    auto data = LoadIdx(images, labels);
    REQUIRE_FALSE(data.ok());
    CHECK(data.status().message() == labels + ": label 12 at offset 9: expected 0..9");
  }
  SUBCASE("counts disagree") {
    WriteFile(images, IdxImages(2, 1, 1, "ab"));
    auto data = LoadIdx(images, labels);
    REQUIRE_FALSE(data.ok());
    CHECK(data.status().message() == labels + ": 3 labels, but " + images + " has 2 images");
  }
  SUBCASE("a missing file") {
    auto data = LoadIdx(dir.File("nope"), labels);
    REQUIRE_FALSE(data.ok());
    CHECK(data.status().code() == StatusCode::kNotFound);
    CHECK(Contains(data.status().message(), dir.File("nope")));
  }
}

// ---------------------------------------------------------------- Criteo

// A Criteo line from its 40 fields.
std::string Line(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) line += (i ? "\t" : "") + fields[i];
  return line;
}

std::vector<std::string> GoodFields(const std::string& label) {
  std::vector<std::string> f = {label};
  for (int j = 0; j < kCriteoDense; ++j) f.push_back(std::to_string(j));
  for (int c = 0; c < kCriteoCategorical; ++c) f.push_back("68fd1e6" + std::to_string(c % 10));
  return f;
}

TEST_CASE("a Criteo line with empty fields parses into log-scaled counts and hashed ids") {
  std::vector<std::string> f = GoodFields("1");
  f[1] = "";      // I1 empty -> 0
  f[2] = "-3";    // I2 negative -> 0
  f[3] = "1000";  // log(1001)
  f[4] = "2.5";   // a decimal is accepted
  f[14] = "";     // C1 empty: its own bucket
  float label = -1, dense[kCriteoDense];
  int64_t ids[kCriteoCategorical];
  const int64_t vocab = 1000;
  Status s = ParseCriteoLine(Line(f), vocab, &label, dense, ids);
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(label == 1.0f);
  CHECK(dense[0] == 0.0f);
  CHECK(dense[1] == 0.0f);
  CHECK(dense[2] == doctest::Approx(std::log(1001.0)));
  CHECK(dense[3] == doctest::Approx(std::log(3.5)));
  CHECK(dense[12] == doctest::Approx(std::log(13.0)));
  CHECK(ids[0] == static_cast<int64_t>(CriteoHash(0, "") % vocab));
  for (int c = 1; c < kCriteoCategorical; ++c) {
    CHECK(ids[c] == static_cast<int64_t>(CriteoHash(c, f[14 + c]) % vocab));
  }
}

TEST_CASE("the categorical hash is fixed, depends on the field, and ids stay in range") {
  // Pinned values (checked against an independent Python implementation):
  // ids must not change between builds or platforms, or a
  // saved embedding table would no longer match its data.
  CHECK(CriteoHash(0, "") == 0x668321fe5c9f6e52ULL);
  CHECK(CriteoHash(0, "68fd1e64") == 0xa54ff00d478ca750ULL);
  CHECK(CriteoHash(25, "68fd1e64") == 0x1c8080ce8c387692ULL);
  CHECK(CriteoHash(0, "68fd1e64") != CriteoHash(1, "68fd1e64"));
  CHECK(CriteoHash(3, "") != CriteoHash(4, ""));
  std::set<int64_t> seen;
  float label, dense[kCriteoDense];
  int64_t ids[kCriteoCategorical];
  for (int i = 0; i < 200; ++i) {
    std::vector<std::string> f = GoodFields("0");
    for (int c = 0; c < kCriteoCategorical; ++c) f[14 + c] = std::to_string(i * 31 + c);
    REQUIRE(ParseCriteoLine(Line(f), 97, &label, dense, ids).ok());
    for (int64_t id : ids) {
      REQUIRE(id >= 0);
      REQUIRE(id < 97);
      seen.insert(id);
    }
  }
  CHECK(seen.size() == 97);  // the hash spreads over the whole vocabulary
}

TEST_CASE("Criteo files: gzip, CRLF and a missing final newline read the same") {
  TempDir dir;
  const std::string text = Line(GoodFields("0")) + "\n" + Line(GoodFields("1")) + "\n";
  WriteFile(dir.File("plain"), text);
  WriteGz(dir.File("gz"), text);
  std::string crlf = Line(GoodFields("0")) + "\r\n" + Line(GoodFields("1"));
  WriteFile(dir.File("crlf"), crlf);
  Dataset a, b, c;
  REQUIRE(AppendCriteo(dir.File("plain"), 1 << 20, 0, &a).ok());
  REQUIRE(AppendCriteo(dir.File("gz"), 1 << 20, 0, &b).ok());
  REQUIRE(AppendCriteo(dir.File("crlf"), 1 << 20, 0, &c).ok());
  CHECK(a.size() == 2);
  CHECK(a.labels == std::vector<float>{0, 1});
  CHECK(a.sample_shape == Shape{kCriteoDense});
  CHECK(a.fields == kCriteoCategorical);
  for (const Dataset* d : {&b, &c}) {
    CHECK(d->labels == a.labels);
    CHECK(d->dense == a.dense);
    CHECK(d->sparse == a.sparse);
  }
  Dataset limited;
  REQUIRE(AppendCriteo(dir.File("plain"), 1 << 20, 1, &limited).ok());
  CHECK(limited.size() == 1);
}

TEST_CASE("Criteo errors name the file, the line and its byte offset") {
  TempDir dir;
  const std::string path = dir.File("train.txt-00001");
  const std::string good = Line(GoodFields("0")) + "\n";
  Dataset data;
  SUBCASE("a short line") {
    std::vector<std::string> f = GoodFields("1");
    f.pop_back();
    WriteFile(path, good + good + Line(f) + "\n" + good);
    Status s = AppendCriteo(path, 100, 0, &data);
    CHECK(s.message() == path + ": line 3 (offset " + std::to_string(2 * good.size()) +
                             "): expected 40 tab-separated fields, got 39");
  }
  SUBCASE("a bad label") {
    WriteFile(path, good + Line(GoodFields("2")) + "\n");
    Status s = AppendCriteo(path, 100, 0, &data);
    CHECK(s.message() == path + ": line 2 (offset " + std::to_string(good.size()) +
                             "): label '2': expected 0 or 1");
  }
  SUBCASE("a bad count") {
    std::vector<std::string> f = GoodFields("0");
    f[5] = "12x";
    WriteFile(path, Line(f) + "\n");
    Status s = AppendCriteo(path, 100, 0, &data);
    CHECK(s.message() == path + ": line 1 (offset 0): I5 '12x': expected a number");
  }
  SUBCASE("an empty line") {
    WriteFile(path, good + "\n" + good);
    Status s = AppendCriteo(path, 100, 0, &data);
    CHECK(Contains(s.message(), path + ": line 2 (offset "));
    CHECK(Contains(s.message(), "got 1"));
  }
}

// ---------------------------------------------------------------- Sharding

TEST_CASE("shard files go to worker suffix % workers; a single file goes to every worker") {
  TempDir dir;
  const std::string prefix = dir.File("train.txt");
  // Shard s holds s + 1 lines, so a count tells which shards were read.
  for (int s = 0; s < 5; ++s) {
    std::string text;
    for (int i = 0; i <= s; ++i) text += Line(GoodFields(std::to_string(i % 2))) + "\n";
    WriteFile(prefix + "-0000" + std::to_string(s), text);
  }
  WriteFile(dir.File("train.txt-0000x"), "not a shard");
  DataConfig config;
  config.format = DataFormat::kCriteo;
  config.train = {prefix};

  auto all = ListShards(prefix);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 5);
  std::vector<int64_t> w0, w1;
  for (const ShardFile& s : ShardsOf(*all, 0, 2)) w0.push_back(s.index);
  for (const ShardFile& s : ShardsOf(*all, 1, 2)) w1.push_back(s.index);
  CHECK(w0 == std::vector<int64_t>{0, 2, 4});
  CHECK(w1 == std::vector<int64_t>{1, 3});

  auto shard0 = LoadTrainShard(config, 0, 2), shard1 = LoadTrainShard(config, 1, 2);
  REQUIRE(shard0.ok());
  REQUIRE(shard1.ok());
  CHECK(shard0->size() == 1 + 3 + 5);
  CHECK(shard1->size() == 2 + 4);
  CHECK(shard0->sharded_by_file);

  config.limit = 4;
  CHECK(LoadTrainShard(config, 0, 2)->size() == 4);
  config.limit = 0;

  DataConfig whole;
  whole.format = DataFormat::kCriteo;
  whole.test = {prefix};
  auto test = LoadWhole(whole, {prefix}, "test");
  REQUIRE(test.ok());
  CHECK(test->size() == 15);  // evaluation reads every shard
  CHECK_FALSE(test->sharded_by_file);

  auto lonely = LoadTrainShard(config, 5, 6);
  REQUIRE_FALSE(lonely.ok());
  CHECK(Contains(lonely.status().message(), "worker 5 of 6 has no shard: " + prefix + "-00000"));
  CHECK(Contains(lonely.status().message(), "(5 files for 6 workers)"));

  WriteFile(dir.File("single"), Line(GoodFields("1")) + "\n" + Line(GoodFields("0")) + "\n");
  config.train = {dir.File("single")};
  auto single = LoadTrainShard(config, 1, 2);
  REQUIRE(single.ok());
  CHECK(single->size() == 2);
  CHECK_FALSE(single->sharded_by_file);

  config.train = {dir.File("gone"), prefix, dir.File("gone2")};
  auto missing = LoadTrainShard(config, 0, 1);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message() ==
        "missing data files: " + dir.File("gone") + ", " + dir.File("gone2"));
}

// What a job checks against its model before it starts: the first n samples
// of every file, each named (an idx pair as its two files; every criteo
// shard, whichever worker reads it; then the test files).
TEST_CASE("the first samples of every data file, each with its file's name") {
  TempDir dir;
  std::string pixels;
  for (int i = 0; i < 5 * 2 * 2; ++i) pixels.push_back(static_cast<char>(i));
  WriteFile(dir.File("i"), IdxImages(5, 2, 2, pixels));
  WriteFile(dir.File("l"), IdxLabels({3, 1, 4, 1, 5}));
  auto three = LoadIdx(dir.File("i"), dir.File("l"), 3);
  REQUIRE(three.ok());
  CHECK(three->labels == std::vector<float>{3, 1, 4});
  CHECK(three->dense.size() == 3u * 2 * 2);
  DataConfig idx;
  idx.train = {dir.File("i"), dir.File("l")};
  idx.test = idx.train;
  auto firsts = ReadFirstSamples(idx, 2);
  REQUIRE(firsts.ok());
  REQUIRE(firsts->size() == 2);
  CHECK((*firsts)[0].features == dir.File("i"));
  CHECK((*firsts)[0].labels == dir.File("l"));
  CHECK((*firsts)[1].samples.labels == std::vector<float>{3, 1});
  CHECK((*firsts)[1].samples.sample_shape == Shape{1, 2, 2});

  const std::string prefix = dir.File("train.txt");
  for (int s = 0; s < 3; ++s) {
    std::string text;
    for (int i = 0; i < 4; ++i) text += Line(GoodFields("1")) + "\n";
    WriteFile(prefix + "-0000" + std::to_string(s), text);
  }
  DataConfig criteo;
  criteo.format = DataFormat::kCriteo;
  criteo.train = {prefix};
  auto shards = ReadFirstSamples(criteo, 3);
  REQUIRE(shards.ok());
  REQUIRE(shards->size() == 3);
  for (int s = 0; s < 3; ++s) {
    CHECK((*shards)[s].features == prefix + "-0000" + std::to_string(s));
    CHECK((*shards)[s].samples.size() == 3);
    CHECK((*shards)[s].samples.fields == kCriteoCategorical);
  }
  criteo.test = {dir.File("gone")};
  auto missing = ReadFirstSamples(criteo, 3);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "missing data files: " + dir.File("gone"));
}

// ---------------------------------------------------------------- Batcher

// n samples whose label and only dense feature are their index.
TEST_CASE("the generator writes readable Criteo shards with a learnable planted model") {
  TempDir dir;
  GenOptions options;
  options.rows = 20000;
  options.shards = 3;
  options.out_dir = dir.path();
  options.seed = 7;
  WriteFile(dir.File("train.txt-00007"), "stale shard of an earlier run");
  auto report = GenerateCriteo(options);
  INFO(report.status().ToString());
  REQUIRE(report.ok());
  CHECK(report->test_rows == 2000);
  CHECK(report->files.size() == 4);
  CHECK_FALSE(fs::exists(dir.File("train.txt-00007")));
  MESSAGE("planted AUC " << report->planted_auc << ", click rate " << report->positive_rate);
  CHECK(report->planted_auc > 0.7);
  CHECK(report->planted_auc < 0.95);
  CHECK(report->positive_rate > 0.15);
  CHECK(report->positive_rate < 0.35);

  DataConfig config;
  config.format = DataFormat::kCriteo;
  config.train = {dir.File("train.txt")};
  config.test = {dir.File("test.txt")};
  auto train = LoadTrainShard(config, 0, 1);
  INFO(train.status().ToString());
  REQUIRE(train.ok());
  CHECK(train->size() == 20000);
  auto part = LoadTrainShard(config, 2, 3);
  REQUIRE(part.ok());
  CHECK(part->size() == 6666);
  auto test = LoadWhole(config, config.test, "test");
  REQUIRE(test.ok());
  CHECK(test->size() == 2000);
  int64_t empties = 0;  // some values are empty, as in Criteo
  const std::string first = ReadFile(dir.File("test.txt"));
  for (size_t i = 1; i < first.size(); ++i) empties += first[i] == '\t' && first[i - 1] == '\t';
  CHECK(empties > 0);

  // The same seed gives the same files; the rows do not depend on sharding.
  const std::string shard1 = ReadFile(dir.File("train.txt-00001"));
  auto again = GenerateCriteo(options);
  REQUIRE(again.ok());
  CHECK(again->planted_auc == report->planted_auc);
  CHECK(ReadFile(dir.File("train.txt-00001")) == shard1);
  options.shards = 1;
  REQUIRE(GenerateCriteo(options).ok());
  CHECK_FALSE(fs::exists(dir.File("train.txt-00001")));
  auto whole = LoadTrainShard(config, 0, 1);
  REQUIRE(whole.ok());
  CHECK(whole->sparse == train->sparse);
  options.seed = 8;
  auto other = GenerateCriteo(options);
  REQUIRE(other.ok());
  CHECK(other->planted_auc != report->planted_auc);
}

TEST_CASE("pstrain gen rejects a bad command line with status 2") {
  CHECK(RunGen({}) == 2);
  CHECK(RunGen({"mnist"}) == 2);
  CHECK(RunGen({"criteo", "--rows"}) == 2);
  CHECK(RunGen({"criteo", "--rows", "ten", "--out", "/tmp/x"}) == 2);
  CHECK(RunGen({"criteo", "--rows", "10", "--color", "red", "--out", "/tmp/x"}) == 2);
  CHECK(RunGen({"criteo", "--rows", "10"}) == 2);
  CHECK(RunGen({"criteo", "--rows", "10", "--shards", "20", "--out", "/tmp/x"}) == 2);
  TempDir dir;
  CHECK(RunGen({"criteo", "--rows", "100", "--shards", "2", "--out", dir.path()}) == 0);
  CHECK(fs::exists(dir.File("train.txt-00001")));
  CHECK(fs::exists(dir.File("test.txt")));
}

}  // namespace
}  // namespace pstrain
