// What two nodes or a node and a checkpoint compare: which keys count, and
// the line that names how two configs differ.
#include <doctest/doctest.h>

#include <string>

#include "src/common/config/identity.h"
#include "tests/config_test_util.h"

namespace pstrain {
namespace {

using testing::Parse;

const char* const kJob = R"(model: {input: [4], layers: [{type: linear, out: 2}, relu]}
data: {format: criteo, train: [/data/day_0.txt, /data/day_1.txt], test: [/data/test.txt]}
train:
  epochs: 10
  batch_size: 32
  optimizer: {type: momentum, lr: 0.05, momentum: 0.9}
  seed: 7
  checkpoint: {dir: /mnt/a/ckpt, every_steps: 100}
  store_dir: /local/store
parameters:
  - {match: "emb_*", init_in_server: true, cache_rows: 1000, server_cache_rows: 500}
)";

// kJob with `from` replaced by `to` (which must be there once).
std::string With(const std::string& from, const std::string& to) {
  std::string text = kJob;
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

TEST_CASE("every scalar of the file is a setting, by its key path") {
  const Config c = Parse(kJob);
  CHECK(c.settings.at("train.optimizer.lr") == "0.05");
  CHECK(c.settings.at("model.layers[0].out") == "2");
  CHECK(c.settings.at("model.layers[1]") == "relu");
  CHECK(c.settings.at("data.train[1]") == "/data/day_1.txt");
  CHECK(c.settings.at("parameters[0].match") == "emb_*");
}

TEST_CASE("the job's config leaves out where a node keeps its files, and only that") {
  const std::string text = JobConfigText(Parse(kJob));
  CHECK(text.find("train.optimizer.lr: 0.05\n") != std::string::npos);
  CHECK(text.find("train.epochs: 10\n") != std::string::npos);
  for (const char* local : {"data.train", "data.test", "checkpoint.dir", "store_dir"})
    CHECK(text.find(local) == std::string::npos);
  // Another host's paths: the same job.
  CHECK(JobConfigText(Parse(With("/mnt/a/ckpt", "/mnt/b/ckpt"))) == text);
  CHECK(JobConfigText(Parse(With("/data/day_0.txt", "/other/day_0.txt"))) == text);
  CHECK(JobConfigText(Parse(With("seed: 7", "seed: 8"))) != text);
}

TEST_CASE("a config too long to send whole is sent as a digest") {
  std::string many = kJob;
  for (int i = 0; i < 8000; ++i) many += "  - {match: \"rule_number_" + std::to_string(i) + "\"}\n";
  const std::string text = JobConfigText(Parse(many));
  CHECK(text.rfind("config.digest: ", 0) == 0);
  CHECK(text.size() == 32);
  CHECK(JobConfigText(Parse(many + "  - {match: \"one_more\"}\n")) != text);
}

TEST_CASE("a checkpoint's job: what decides the model, not how long or with what memory") {
  const std::string identity = JobIdentityText(Parse(kJob));
  // Resumed with more epochs, other checkpoint settings or cache sizes, or
  // the data mounted elsewhere: the same job.
  for (auto [from, to] : {std::pair<const char*, const char*>{"epochs: 10", "epochs: 20"},
                          {"every_steps: 100", "every_steps: 50"},
                          {"cache_rows: 1000", "cache_rows: 9"},
                          {"server_cache_rows: 500", "server_cache_rows: 50"},
                          {"/data/day_0.txt", "/elsewhere/day_0.txt"}})
    CHECK_MESSAGE(JobIdentityText(Parse(With(from, to))) == identity, from);
  // Another model, optimizer, seed, batch or data: another job.
  for (auto [from, to] : {std::pair<const char*, const char*>{"out: 2", "out: 3"},
                          {"momentum: 0.9", "momentum: 0.5"},
                          {"seed: 7", "seed: 8"},
                          {"batch_size: 32", "batch_size: 64"},
                          {"day_1.txt", "day_2.txt"}})
    CHECK_MESSAGE(JobIdentityText(Parse(With(from, to))) != identity, from);
}

TEST_CASE("a difference names the first keys and both values") {
  const std::string a = JobConfigText(Parse(kJob));
  const std::string b = JobConfigText(Parse(With("lr: 0.05", "lr: 0.5")));
  CHECK(DescribeConfigDifference(b, "here", a, "there") ==
        "train.optimizer.lr is 0.5 here, 0.05 there");
  CHECK(DescribeConfigDifference(a, "here", a, "there").empty());
  const std::string c = JobConfigText(Parse(With("seed: 7", "seed: 8\n  mode: async")));
  CHECK(DescribeConfigDifference(c, "here", a, "there") ==
        "train.mode is async here, not set there; train.seed is 8 here, 7 there");
  const std::string d =
      JobConfigText(Parse(With("epochs: 10\n  batch_size: 32", "epochs: 1\n  batch_size: 3")));
  CHECK(DescribeConfigDifference(d + "z: 1\n", "here", a, "there", 1) ==
        "train.batch_size is 3 here, 32 there; and 2 more");
}

}  // namespace
}  // namespace pstrain
