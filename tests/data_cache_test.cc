// DataCache (roles/worker/data_cache.h): a worker's data sets, kept across
// its runs, read again only when what decides their samples changes.
#include "roles/worker/data_cache.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "src/data/criteo_gen.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

using testing::TempDir;

DataConfig Criteo(const std::string& train, const std::string& test) {
  DataConfig c;
  c.format = DataFormat::kCriteo;
  c.train = {train};
  c.test = {test};
  c.vocab = 4096;
  return c;
}

TEST_CASE("an index-split set is read once for every rank and worker count; shards per rank") {
  TempDir tmp;
  GenOptions gen;
  gen.rows = 300;
  gen.test_rows = 50;
  gen.shards = 2;
  gen.out_dir = tmp.path();
  REQUIRE(GenerateCriteo(gen).ok());
  // One file: split by sample index, the same samples whatever the shape.
  std::filesystem::copy_file(tmp / "train.txt-00000", tmp / "one.txt");
  DataCache cache;
  DataConfig one = Criteo(tmp / "one.txt", tmp / "test.txt");
  auto a = cache.Train(one, 0, 2);
  REQUIRE(a.ok());
  auto b = cache.Train(one, 2, 3);
  REQUIRE(b.ok());
  CHECK(a->get() == b->get());  // not read again
  // Another limit: other samples, read again.
  one.limit = 10;
  auto limited = cache.Train(one, 0, 2);
  REQUIRE(limited.ok());
  CHECK(limited->get() != a->get());
  CHECK((*limited)->size() == 10);
  // File shards: kept for the rank and worker count they were read for.
  const DataConfig shards = Criteo(tmp / "train.txt", tmp / "test.txt");
  auto s0 = cache.Train(shards, 0, 2);
  REQUIRE(s0.ok());
  CHECK((*s0)->sharded_by_file);
  CHECK(cache.Train(shards, 0, 2)->get() == s0->get());
  auto s1 = cache.Train(shards, 1, 2);
  REQUIRE(s1.ok());
  CHECK(s1->get() != s0->get());
  auto whole = cache.Train(shards, 0, 1);
  REQUIRE(whole.ok());
  CHECK((*whole)->size() == (*s0)->size() + (*s1)->size());
  // The test set, once.
  auto t = cache.Test(shards);
  REQUIRE(t.ok());
  CHECK(cache.Test(shards)->get() == t->get());
  CHECK((*t)->size() == 50);
  // Preload reads an index-split set now, and leaves file shards to the run.
  DataCache preloaded;
  one.limit = 0;
  preloaded.Preload(one);
  preloaded.Preload(shards);
  auto p = preloaded.Train(one, 1, 2);
  REQUIRE(p.ok());
  CHECK((*p)->size() == (*a)->size());
}

}  // namespace
}  // namespace pstrain
