// Sizes a config implies are capped before anything is allocated: each
// issue-13 example is a one-line file:line: key: error, and the shipped
// configs (and models near the caps) still pass.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "src/common/config/config.h"
#include "src/common/config/sizes.h"
#include "tests/config_test_util.h"

namespace pstrain {
namespace {

using testing::ErrorOf;
using testing::Parse;

std::string Mlp(const std::string& input, const std::string& out, int batch = 64) {
  return "model:\n  input: " + input +
         "\n  layers:\n    - flatten\n    - {name: fc1, type: linear, out: " + out +
         "}\n    - {name: fc2, type: linear, out: 10}\ntrain: {batch_size: " +
         std::to_string(batch) + "}\n";
}

// Wide&Deep-like: an embedding_bag, held by the servers or by the workers.
std::string Embedding(const std::string& vocab, const std::string& dim, bool on_servers,
                      const std::string& cache_rows = "0") {
  std::string yaml =
      "model:\n  input: [13]\n  sparse_fields: 26\n  loss: bce_with_logits\n"
      "  layers:\n    - {name: emb, type: embedding_bag, vocab: " +
      vocab + ", dim: " + dim + "}\n    - {name: fc, type: linear, out: 1}\n";
  if (on_servers)
    yaml += "parameters:\n  - {match: emb.weight, init_in_server: true, cache_rows: " + cache_rows +
            "}\n";
  return yaml;
}

TEST_CASE("a linear layer of 2e9 outputs is refused at its key") {
  CHECK(ErrorOf(Mlp("[1, 28, 28]", "2000000000")) ==
        "x.yaml:5: model.layers[1].out: makes parameter 'fc1.weight' of 1568000000000 elements; "
        "at most 2147483647 per tensor");
}

TEST_CASE("an input of 1e10 elements is refused") {
  CHECK(ErrorOf(Mlp("[1, 100000, 100000]", "10"))
            .rfind("x.yaml:2: model.input: a batch of 64 "
                   "samples of [1, 100000, 100000] is",
                   0) == 0);
  // The batch counts: a sample that fits, times a batch that does not.
  CHECK(ErrorOf(Mlp("[1, 1000, 1000]", "10", 4096)).find("lower train.batch_size") !=
        std::string::npos);
}

TEST_CASE("an embedding vocabulary of 1e15 is refused, however written") {
  for (const char* vocab : {"1000000000000000", "1e15"}) {
    CAPTURE(vocab);
    CHECK(ErrorOf(Embedding(vocab, "16", true)) ==
          "x.yaml:6: model.layers[0].vocab: expected an integer in 1..1099511627776, got '" +
              std::string(vocab) + "'");
  }
}

TEST_CASE("an embedding dim of 100000 is refused") {
  CHECK(ErrorOf(Embedding("1000", "100000", true)) ==
        "x.yaml:6: model.layers[0].dim: expected an integer in 1..65536, got '100000'");
}

TEST_CASE("a table is a parameter where the workers hold it, rows on demand where the servers do") {
  // 2^40 hashed ids on the servers cost the rows touched: fine.
  Parse(Embedding("1099511627776", "16", true));
  // The same table held by every worker would be 2^44 floats.
  CHECK(ErrorOf(Embedding("1099511627776", "16", false))
            .find("model.layers[0].vocab: makes "
                  "parameter 'emb.weight'") != std::string::npos);
  // A worker's cache of a server-held table is allocated whole.
  CHECK(ErrorOf(Embedding("1000000", "64", true, "100000000"))
            .find("x.yaml:9: parameters[0].cache_rows: 100000000 rows of dim 64") !=
        std::string::npos);
}

TEST_CASE("a table's row limit, reserved up front on each server, is capped") {
  std::string yaml = Embedding("1000000", "16", false) +
                     "parameters:\n  - {match: emb.weight, init_in_server: true, max_rows: "
                     "1000000000}\n";
  CHECK(ErrorOf(yaml) ==
        "x.yaml:9: parameters[0].max_rows: expected an integer in 0..268435456, got "
        "'1000000000'");
}

TEST_CASE("all parameters together are capped") {
  // Each tensor fits (2^31-1 at most), three of them do not.
  std::string yaml =
      "model:\n  input: [32768]\n  layers:\n"
      "    - {name: a, type: linear, out: 65535}\n"
      "    - {name: b, type: linear, out: 32768}\n"
      "    - {name: c, type: linear, out: 65535}\n"
      "train: {batch_size: 1}\n";
  CHECK(ErrorOf(yaml).rfind("x.yaml:6: model.layers[2].out: the model's parameters reach", 0) == 0);
}

TEST_CASE("a layer's output for a batch is capped") {
  std::string yaml =
      "model:\n  input: [1, 256, 256]\n  layers:\n"
      "    - {name: c, type: conv2d, out_channels: 4096, kernel: 1}\n"
      "    - flatten\n    - {name: fc, type: linear, out: 10}\n"
      "train: {batch_size: 64}\n";
  CHECK(ErrorOf(yaml).rfind("x.yaml:4: model.layers[0]: its output for a batch of 64 samples", 0) ==
        0);
}

TEST_CASE("the shipped configs pass the caps") {
  const std::filesystem::path dir = std::filesystem::path(PSTRAIN_SOURCE_DIR) / "configs";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    CAPTURE(entry.path().string());
    auto config = LoadConfig(entry.path().string());
    CHECK(config.ok());
    ++checked;
  }
  CHECK(checked >= 5);
}

}  // namespace
}  // namespace pstrain
