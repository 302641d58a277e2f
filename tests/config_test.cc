// The YAML config: what a user gets for a valid file, and the exact
// file:line: key message for each kind of mistake.
#include "src/common/config/config.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "src/common/config/text.h"
#include "tests/config_test_util.h"

namespace pstrain {
namespace {

using testing::ErrorOf;
using testing::Parse;
using testing::TempFile;

const char* const kFull = R"(model: {input: [4], layers: [{type: linear, out: 2}]}
data: {format: criteo, train: day_0.txt}
train:
  epochs: 10
  batch_size: 32
  steps: 500
  mode: ssp
  staleness: 3
  optimizer: {type: momentum, lr: 0.05, momentum: 0.8, nesterov: true, weight_decay: 0.001}
  seed: 18446744073709551615
  log_every: 7
  partition_bytes: 8192
  checkpoint: {dir: ckpt, every_steps: 1000, resume: yes, keep: 5}
parameters:
  - {match: "conv*", ps: true}
  - {match: "fc*", ps: false}
  - match: "emb_*"
    init_in_server: true
    cache_rows: 100000
    optimizer: {type: adagrad, lr: 0.1, initial_accumulator: 0.5}
)";

TEST_CASE("a full config parses to its values") {
  Config c = Parse(kFull);
  CHECK(c.source == "x.yaml");
  CHECK(c.has_model);
  CHECK(c.has_data);
  CHECK(c.data.train == std::vector<std::string>{"day_0.txt"});  // ParseConfig: as written
  CHECK(c.train.epochs == 10);
  CHECK(c.train.batch_size == 32);
  CHECK(c.train.steps == 500);
  CHECK(c.train.mode == UpdateMode::kSsp);
  CHECK(c.train.staleness == 3);
  CHECK(c.train.optimizer.type == OptimizerType::kMomentum);
  CHECK(c.train.optimizer.lr == doctest::Approx(0.05));
  CHECK(c.train.optimizer.momentum == doctest::Approx(0.8));
  CHECK(c.train.optimizer.nesterov);
  CHECK(c.train.optimizer.weight_decay == doctest::Approx(0.001));
  CHECK(c.train.optimizer.beta2 == doctest::Approx(0.999));  // unset: default
  CHECK(c.train.seed == 18446744073709551615ull);
  CHECK(c.train.log_every == 7);
  CHECK(c.train.partition_bytes == 8192);
  REQUIRE(c.train.checkpoint);
  CHECK(c.train.checkpoint->dir == "ckpt");
  CHECK(c.train.checkpoint->every_steps == 1000);
  CHECK(c.train.checkpoint->resume);
  CHECK(c.train.checkpoint->keep == 5);

  REQUIRE(c.parameters.size() == 3);
  CHECK(c.parameters[0].match == "conv*");
  CHECK(c.parameters[0].ps);
  CHECK(c.parameters[0].line == 15);
  CHECK_FALSE(c.parameters[0].optimizer);
  CHECK(c.parameters[1].match == "fc*");
  CHECK_FALSE(c.parameters[1].ps);
  const ParameterRule& emb = c.parameters[2];
  CHECK(emb.match == "emb_*");
  CHECK(emb.ps);  // default
  CHECK(emb.init_in_server);
  CHECK(emb.cache_rows == 100000);
  CHECK(emb.line == 17);
  REQUIRE(emb.optimizer);
  CHECK(emb.optimizer->type == OptimizerType::kAdagrad);
  CHECK(emb.optimizer->lr == doctest::Approx(0.1));
  CHECK(emb.optimizer->initial_accumulator == doctest::Approx(0.5));
  CHECK(emb.optimizer->weight_decay == 0.0f);  // defaults, not train.optimizer's
}

TEST_CASE("missing sections and keys take the defaults") {
  for (const char* yaml : {"model: {input: [2], layers: [relu]}\n", "train:\nparameters:\n",
                           "train: {}\nparameters: []\n"}) {
    CAPTURE(yaml);
    Config c = Parse(yaml);
    CHECK_FALSE(c.has_data);
    TrainConfig d;
    CHECK(c.train.epochs == d.epochs);
    CHECK(c.train.batch_size == 64);
    CHECK(c.train.steps == 0);
    CHECK(c.train.mode == UpdateMode::kSync);
    CHECK(c.train.optimizer.type == OptimizerType::kSgd);
    CHECK(c.train.optimizer.lr == doctest::Approx(0.01));
    CHECK(c.train.seed == 1);
    CHECK(c.train.log_every == 100);
    CHECK(c.train.partition_bytes == 4 << 20);
    CHECK_FALSE(c.train.checkpoint);
    CHECK(c.parameters.empty());
  }
  Config c = Parse("train: {optimizer: {type: adam}, checkpoint: {dir: /tmp/ck}}\n");
  CHECK(c.train.optimizer.type == OptimizerType::kAdam);
  CHECK(c.train.optimizer.lr == doctest::Approx(0.01));
  CHECK(c.train.checkpoint->every_steps == 0);
  CHECK_FALSE(c.train.checkpoint->resume);
  CHECK(c.train.checkpoint->keep == 3);
}

TEST_CASE("adamw decays by 0.01 unless told; a schedule reads its keys") {
  Config c = Parse("train: {optimizer: {type: adamw, lr: 0.001}}\n");
  CHECK(c.train.optimizer.type == OptimizerType::kAdamW);
  CHECK(c.train.optimizer.weight_decay == doctest::Approx(0.01));
  c = Parse("train: {optimizer: {type: adamw, weight_decay: 0}}\n");
  CHECK(c.train.optimizer.weight_decay == 0.0f);
  c = Parse(
      "train: {optimizer: {type: rmsprop, alpha: 0.9, warmup_steps: 100, cosine_steps: 900, "
      "min_lr: 0.0001}}\n");
  CHECK(c.train.optimizer.type == OptimizerType::kRmsprop);
  CHECK(c.train.optimizer.alpha == doctest::Approx(0.9));
  CHECK(c.train.optimizer.warmup_steps == 100);
  CHECK(c.train.optimizer.cosine_steps == 900);
  CHECK(c.train.optimizer.min_lr == doctest::Approx(0.0001));
  CHECK(c.train.optimizer.weight_decay == 0.0f);
}

TEST_CASE("an unknown key names itself and the allowed keys") {
  CHECK(ErrorOf("train: {}\ntrian:\n  epochs: 1\n") ==
        "x.yaml:2: trian: unknown key (allowed: model, data, train, parameters)");
  CHECK(ErrorOf("train:\n  epochs: 2\n  optimizer:\n    type: sgd\n    learning_rate: 0.1\n") ==
        "x.yaml:5: train.optimizer.learning_rate: unknown key (allowed: type, lr, weight_decay, "
        "warmup_steps, lr_decay_steps, lr_decay, cosine_steps, min_lr, "
        "momentum, nesterov, beta1, beta2, epsilon, alpha, initial_accumulator, lr_power, l1, l2)");
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c, every: 5}\n") ==
        "x.yaml:2: train.checkpoint.every: unknown key (allowed: dir, every_steps, resume, keep, "
        "keep_best)");
  CHECK(ErrorOf("parameters:\n  - {match: a}\n  - {match: b, cache: 5}\n") ==
        "x.yaml:3: parameters[1].cache: unknown key (allowed: match, ps, init_in_server, "
        "cache_rows, cache_staleness, admit_after, evict_after_steps, max_rows, "
        "server_cache_rows, server_cache_bytes, optimizer, compression)");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, tau: 1}\n") ==
        "x.yaml:2: train.compression.tau: unknown key (allowed: type, threshold, adaptive, "
        "target_density, step, shake_up_every, warmup_epochs, warmup_density, pull_density)");
}

TEST_CASE("a value of the wrong type names the key and what it got") {
  CHECK(ErrorOf("train:\n  optimizer: {type: sgd, lr: fast}\n") ==
        "x.yaml:2: train.optimizer.lr: expected a number > 0, got 'fast'");
  CHECK(ErrorOf("train:\n  epochs: [1, 2]\n") ==
        "x.yaml:2: train.epochs: expected an integer >= 1, got a list");
  CHECK(ErrorOf("train:\n  epochs: 2.5\n") ==
        "x.yaml:2: train.epochs: expected an integer >= 1, got '2.5'");
  CHECK(ErrorOf("train:\n  batch_size:\n") ==
        "x.yaml:2: train.batch_size: expected an integer in 1..1048576, got nothing");
  CHECK(ErrorOf("train:\n  seed: -1\n") ==
        "x.yaml:2: train.seed: expected an integer >= 0, got '-1'");
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c, resume: maybe}\n") ==
        "x.yaml:2: train.checkpoint.resume: expected true or false, got 'maybe'");
  CHECK(ErrorOf("parameters:\n  - {match: a}\n  - {match: b, ps: maybe}\n") ==
        "x.yaml:3: parameters[1].ps: expected true or false, got 'maybe'");
  CHECK(ErrorOf("train: 5\n") == "x.yaml:1: train: expected a mapping, got '5'");
  CHECK(ErrorOf("parameters: {match: a}\n") ==
        "x.yaml:1: parameters: expected a list of rules, got a mapping");
  CHECK(ErrorOf("parameters:\n  - conv*\n") ==
        "x.yaml:2: parameters[0]: expected a mapping, got 'conv*'");
  CHECK(ErrorOf("- train\n") ==
        "x.yaml:1: expected a mapping of sections at the top level, got a list");
  CHECK(ErrorOf("") == "x.yaml:1: the config is empty; expected a mapping of sections");
  CHECK(ErrorOf("parameters:\n  -\n  - {match: a}\n") ==
        "x.yaml:1: parameters[0]: expected a mapping, got nothing");
  CHECK(ErrorOf("train: {}\n---\ntrian: {}\n") ==
        "x.yaml:3: expected one YAML document, found a second one");
}

TEST_CASE("a value out of range names the key and the range") {
  CHECK(ErrorOf("train:\n  epochs: 3\n  optimizer:\n    type: sgd\n    lr: -1\n") ==
        "x.yaml:5: train.optimizer.lr: expected a number > 0, got '-1'");
  CHECK(ErrorOf("train: {optimizer: {type: sgd, lr: .inf}}\n") ==
        "x.yaml:1: train.optimizer.lr: expected a number > 0, got '.inf'");
  CHECK(ErrorOf("train: {optimizer: {type: momentum, momentum: 1}}\n") ==
        "x.yaml:1: train.optimizer.momentum: expected a number in [0, 1), got '1'");
  CHECK(ErrorOf("train: {optimizer: {type: ftrl, lr_power: 0.5}}\n") ==
        "x.yaml:1: train.optimizer.lr_power: expected a number <= 0, got '0.5'");
  CHECK(ErrorOf("train: {optimizer: {type: ftrl, l1: -0.1}}\n") ==
        "x.yaml:1: train.optimizer.l1: expected a number >= 0, got '-0.1'");
  CHECK(ErrorOf("train: {optimizer: {type: adam, epsilon: 0}}\n") ==
        "x.yaml:1: train.optimizer.epsilon: expected a number > 0, got '0'");
  CHECK(ErrorOf("train:\n  epochs: 0\n") ==
        "x.yaml:2: train.epochs: expected an integer >= 1, got '0'");
  CHECK(ErrorOf("train:\n  batch_size: 1048577\n") ==
        "x.yaml:2: train.batch_size: expected an integer in 1..1048576, got '1048577'");
  CHECK(
      ErrorOf("train:\n  partition_bytes: 4098\n") ==
      "x.yaml:2: train.partition_bytes: expected an integer in 4096..1073741824, a multiple of 4, "
      "got '4098'");
  CHECK(ErrorOf("train:\n  staleness: -1\n") ==
        "x.yaml:2: train.staleness: expected an integer >= 0, got '-1'");
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c, keep: 0}\n") ==
        "x.yaml:2: train.checkpoint.keep: expected an integer >= 1, got '0'");
  CHECK(ErrorOf("train:\n  checkpoint: {dir: ''}\n") ==
        "x.yaml:2: train.checkpoint.dir: expected a non-empty string, got ''");
  CHECK(ErrorOf("parameters:\n  - {match: a, cache_rows: -5}\n") ==
        "x.yaml:2: parameters[0].cache_rows: expected an integer >= 0, got '-5'");
}

TEST_CASE("a bad mode or optimizer type lists the choices") {
  CHECK(ErrorOf("train:\n  mode: fast\n") ==
        "x.yaml:2: train.mode: expected one of sync|async|ssp|average, got 'fast'");
  CHECK(ErrorOf("parameters:\n  - match: emb_*\n    optimizer: {type: lamb}\n") ==
        "x.yaml:3: parameters[0].optimizer.type: expected one of "
        "sgd|momentum|adam|adagrad|ftrl|adamw|rmsprop, got 'lamb'");
}

TEST_CASE("a missing required key is named at its section's line") {
  CHECK(ErrorOf("train:\n  epochs: 1\n  optimizer: {lr: 0.1}\n") ==
        "x.yaml:3: train.optimizer.type: required key is missing");
  CHECK(ErrorOf("train:\n  checkpoint: {every_steps: 10}\n") ==
        "x.yaml:2: train.checkpoint.dir: required key is missing");
  CHECK(ErrorOf("parameters:\n  - {match: a}\n  - {ps: false}\n") ==
        "x.yaml:3: parameters[1].match: required key is missing");
}

TEST_CASE("settings that would be silently ignored are errors") {
  CHECK(ErrorOf("train:\n  mode: sync\n  staleness: 2\n") ==
        "x.yaml:3: train.staleness: 2 is only used with mode: ssp");
  CHECK(Parse("train: {mode: ssp, staleness: 0}\n").train.mode == UpdateMode::kSsp);
  CHECK(ErrorOf("parameters:\n  - {match: fc*, ps: false, init_in_server: true}\n") ==
        "x.yaml:2: parameters[0].init_in_server: needs ps: true (with ps: false the parameter is "
        "all-reduced among workers)");
  CHECK(ErrorOf("parameters:\n  - {match: fc*,\n     cache_rows: 10, ps: false}\n") ==
        "x.yaml:3: parameters[0].cache_rows: needs ps: true (with ps: false the parameter is "
        "all-reduced among workers)");
  CHECK(ErrorOf("parameters:\n  - {match: emb, ps: false, evict_after_steps: 100}\n") ==
        "x.yaml:2: parameters[0].evict_after_steps: needs ps: true (with ps: false the parameter "
        "is all-reduced among workers)");
  CHECK(Parse("parameters:\n  - {match: emb, init_in_server: true, admit_after: 3, max_rows: 9}\n")
            .parameters[0]
            .admit_after == 3);
  CHECK(ErrorOf("parameters:\n  - {match: a*}\n  - {match: b}\n  - {match: a*, ps: false}\n") ==
        "x.yaml:4: parameters[2].match: 'a*' is already matched by parameters[0] (line 2), so "
        "this rule never applies");
  CHECK(ErrorOf("train:\n  epochs: 1\n  epochs: 2\n") ==
        "x.yaml:3: train.epochs: duplicate key (first at line 2)");
}

TEST_CASE("recovery is on with checkpoints, off without, and needs them when asked for") {
  CHECK(Parse("train: {optimizer: {type: sgd}}\n").train.RecoveryWaitSeconds() == 0);
  CHECK(Parse("train: {checkpoint: {dir: c}}\n").train.RecoveryWaitSeconds() == 120);
  CHECK(
      Parse("train: {checkpoint: {dir: c}, recovery: {wait_s: 7}}\n").train.RecoveryWaitSeconds() ==
      7);
  CHECK(
      Parse("train: {checkpoint: {dir: c}, recovery: {wait_s: 0}}\n").train.RecoveryWaitSeconds() ==
      0);
  CHECK(ErrorOf("train:\n  recovery: {wait_s: 60}\n") ==
        "x.yaml:2: train.recovery: needs train.checkpoint: a job recovers by going back to its "
        "newest checkpoint");
  CHECK(Parse("train: {recovery: {wait_s: 0}}\n").train.RecoveryWaitSeconds() == 0);
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c}\n  recovery: {wait_s: -1}\n")
            .find("train.recovery.wait_s") != std::string::npos);
  // How often one link may roll the job back with no progress (scheduler step 5).
  CHECK(Parse("train: {checkpoint: {dir: c}}\n").train.MaxFailedLinkRollbacks() == 3);
  CHECK(Parse("train: {checkpoint: {dir: c}, recovery: {max_failed_link_rollbacks: 0}}\n")
            .train.MaxFailedLinkRollbacks() == 0);
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c}\n  recovery: {max_failed_link_rollbacks: -1}\n")
            .find("train.recovery.max_failed_link_rollbacks") != std::string::npos);
}

TEST_CASE("train.elastic: bounds of workers and servers, with checkpoints, not with average") {
  const Config c =
      Parse("train:\n  checkpoint: {dir: c}\n  elastic: {workers: [2, 8], servers: [1, 3]}\n");
  REQUIRE(c.train.elastic.has_value());
  CHECK(c.train.elastic->min_workers == 2);
  CHECK(c.train.elastic->max_workers == 8);
  CHECK(c.train.elastic->min_servers == 1);
  CHECK(c.train.elastic->max_servers == 3);
  // Servers left out: their count is fixed.
  const Config w = Parse("train:\n  checkpoint: {dir: c}\n  elastic: {workers: [1, 4]}\n");
  CHECK(w.train.elastic->min_servers == -1);
  CHECK_FALSE(Parse("train: {checkpoint: {dir: c}}\n").train.elastic.has_value());
  CHECK(ErrorOf("train:\n  elastic: {workers: [1, 4]}\n") ==
        "x.yaml:2: train.elastic: needs train.checkpoint: a change of shape passes through a "
        "checkpoint of the step it takes effect at");
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c}\n  elastic: {workers: [4, 2]}\n") ==
        "x.yaml:3: train.elastic.workers: expected [min, max] with 1 <= min <= max <= 65536, got "
        "a list");
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c}\n  elastic: {workers: [0, 2]}\n")
            .find("train.elastic.workers: expected [min, max] with 1 <= min") != std::string::npos);
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c}\n  elastic: {servers: [1, 2]}\n")
            .find("train.elastic.workers") != std::string::npos);
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c}\n  elastic: {workers: [1, 2], nodes: 3}\n")
            .find("train.elastic.nodes: unknown key") != std::string::npos);
  CHECK(ErrorOf("train:\n  mode: average\n  average_every: 4\n  checkpoint: {dir: c}\n"
                "  elastic: {workers: [1, 2]}\n") ==
        "x.yaml:5: train.elastic: does not work with mode: average");
  CHECK(ErrorOf("train:\n  checkpoint: {dir: c}\n  recovery: {wait_s: 0}\n"
                "  elastic: {workers: [1, 2]}\n")
            .find("train.elastic: needs train.recovery.wait_s above 0") != std::string::npos);
}

TEST_CASE("a stray comma is a one-line error, not a parser that never returns") {
  // yaml-cpp 0.7's LoadAll looped on these, adding an empty document each
  // turn (found by tests/fuzz/config_fuzz; its input is in the corpus).
  CHECK(ErrorOf(",\n") == "x.yaml:1: column 1: invalid YAML: unexpected ','");
  CHECK(ErrorOf("# a comment\n, b\n") == "x.yaml:2: column 1: invalid YAML: unexpected ','");
  CHECK(ErrorOf("train: {seed: 1}\n,\n") == "x.yaml:2: invalid YAML: end of map not found");
  CHECK(ErrorOf("\"x\"\n,\n") == "x.yaml:2: expected one YAML document, found a second one");
  CHECK(Parse("train: {seed: 2}\n").train.seed == 2);
}

TEST_CASE("a value shown in an error stays on one line") {
  // A block scalar's line breaks once made a message of several lines
  // (found by tests/fuzz/config_fuzz; its input is in the corpus).
  CHECK(ErrorOf("|\n  a\n  b\n") ==
        "x.yaml:1: expected a mapping of sections at the top level, got 'a\\nb\\n'");
  CHECK(ErrorOf("train:\n  ? |\n    se\n    ed\n  : 1\n") ==
        "x.yaml:2: train.se\\ned\\n: unknown key (allowed: epochs, batch_size, steps, mode, "
        "staleness, average_every, optimizer, compression, clip_norm, seed, log_every, "
        "partition_bytes, "
        "checkpoint, early_stopping, recovery, elastic, replication, store_dir)");
  CHECK(ErrorOf("train: {seed: '" + std::string(300, 'x') + "'}\n") ==
        "x.yaml:1: train.seed: expected an integer >= 0, got '" + std::string(200, 'x') + "...'");
}

TEST_CASE("a config's bytes are checked before the YAML parser sees them") {
  // Three bytes that once made yaml-cpp loop and allocate without bound.
  CHECK(ErrorOf(",\003\n") ==
        "x.yaml:1: column 2: control character 0x03 (a config may hold tabs and newlines, no "
        "other)");
  CHECK(ErrorOf(std::string("train:\n  seed: 1\0\n", 18))
            .find("x.yaml:2: column 10: control character 0x00") == 0);
  CHECK(ErrorOf("train: {seed: 1} # \xc3\x28\n") ==
        "x.yaml:1: column 20: byte 0xc3 is not valid UTF-8");
  CHECK(ErrorOf("# \xed\xa0\x80 a surrogate\n").find("is not valid UTF-8") != std::string::npos);
  CHECK(ErrorOf("# \xc0\xaf overlong\n").find("is not valid UTF-8") != std::string::npos);
  CHECK(ErrorOf("# cut short \xe2\x82").find("is not valid UTF-8") != std::string::npos);
  std::string huge = "# " + std::string(kMaxConfigBytes, 'x') + "\n";
  CHECK(ErrorOf(huge).find("a config is at most 1048576 bytes") != std::string::npos);
  // Tabs in comments, Windows line ends and UTF-8 text pass.
  CHECK(Parse("train:\r\n  seed: 7\t# caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\r\n").train.seed ==
        7);
}

TEST_CASE("a YAML syntax error gives the line") {
  CHECK(ErrorOf("train:\n  epochs: [1\n  seed: 2\n") ==
        "x.yaml:3: invalid YAML: end of sequence flow not found");
  CHECK(ErrorOf("train:\n  epochs: 1\n    seed: 2\n") ==
        "x.yaml:3: invalid YAML: illegal map value");
}

TEST_CASE("LoadConfig names the file in errors") {
  TempFile file("train:\n  log_every: 0\n");
  auto bad = LoadConfig(file.path());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        file.path() + ":2: train.log_every: expected an integer >= 1, got '0'");

  auto missing = LoadConfig("/nonexistent/pstrain.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message() ==
        "config /nonexistent/pstrain.yaml: No such file or directory");

  auto directory = LoadConfig(std::filesystem::temp_directory_path().string());
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.status().message().find("Is a directory") != std::string::npos);
}

TEST_CASE("LoadConfig takes relative data paths from the config's directory") {
  const char* yaml =
      "data:\n  format: criteo\n  train: [day_0.txt, /abs/day_1.txt]\n"
      "  test: sub/test.txt\n";
  TempFile file(yaml);
  auto c = LoadConfig(file.path());
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  std::filesystem::path dir = std::filesystem::path(file.path()).parent_path();
  CHECK(c->data.train == std::vector<std::string>{(dir / "day_0.txt").string(), "/abs/day_1.txt"});
  CHECK(c->data.test == std::vector<std::string>{(dir / "sub/test.txt").string()});
  // Without a file there is no directory: paths stay as written.
  CHECK(Parse(yaml).data.train == std::vector<std::string>{"day_0.txt", "/abs/day_1.txt"});
}

TEST_CASE("LoadConfig takes a relative checkpoint.dir from the config's directory") {
  TempFile relative("train:\n  checkpoint: {dir: ckpt/run1}\n");
  auto c = LoadConfig(relative.path());
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  const std::filesystem::path dir = std::filesystem::path(relative.path()).parent_path();
  CHECK(c->train.checkpoint->dir == (dir / "ckpt/run1").string());
  TempFile absolute("train:\n  checkpoint: {dir: /shared/ckpt}\n");
  auto a = LoadConfig(absolute.path());
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  CHECK(a->train.checkpoint->dir == "/shared/ckpt");
  CHECK(Parse("train:\n  checkpoint: {dir: ckpt}\n").train.checkpoint->dir == "ckpt");
}

TEST_CASE("a table's memory budget over disk: server_cache_rows or _bytes, and train.store_dir") {
  Config c = Parse(
      "train: {store_dir: /var/pstrain}\n"
      "parameters:\n  - {match: emb, init_in_server: true, server_cache_rows: 1000}\n"
      "  - {match: e2, init_in_server: true, server_cache_bytes: 1073741824}\n");
  CHECK(c.train.store_dir == "/var/pstrain");
  CHECK(c.parameters[0].server_cache_rows == 1000);
  CHECK(c.parameters[1].server_cache_bytes == int64_t{1} << 30);
  CHECK(Parse("train: {}\n").train.store_dir.empty());
  CHECK(ErrorOf("parameters:\n  - {match: emb, server_cache_rows: 10}\n") ==
        "x.yaml:2: parameters[0].server_cache_rows: needs init_in_server: true (only server-held "
        "tables keep rows on disk)");
  CHECK(ErrorOf("parameters:\n  - {match: emb, init_in_server: true,\n     server_cache_rows: 10, "
                "server_cache_bytes: 4096}\n") ==
        "x.yaml:3: parameters[0].server_cache_bytes: give server_cache_rows or server_cache_bytes, "
        "not both");
  CHECK(ErrorOf("parameters:\n  - {match: emb, init_in_server: true, server_cache_rows: -1}\n")
            .find("parameters[0].server_cache_rows: expected an integer") != std::string::npos);
  CHECK(ErrorOf("train: {store_dir: ''}\n") ==
        "x.yaml:1: train.store_dir: expected a non-empty string, got ''");
  TempFile relative("train: {store_dir: store}\n");
  auto loaded = LoadConfig(relative.path());
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().message());
  CHECK(loaded->train.store_dir ==
        (std::filesystem::path(relative.path()).parent_path() / "store").string());
}

TEST_CASE("GlobMatch") {
  CHECK(GlobMatch("*", ""));
  CHECK(GlobMatch("*", "anything"));
  CHECK(GlobMatch("conv*", "conv"));
  CHECK(GlobMatch("conv*", "conv1.weight"));
  CHECK_FALSE(GlobMatch("conv*", "fc_conv"));
  CHECK(GlobMatch("*.bias", "fc1.bias"));
  CHECK_FALSE(GlobMatch("*.bias", "fc1.bias2"));
  CHECK(GlobMatch("fc?", "fc1"));
  CHECK_FALSE(GlobMatch("fc?", "fc"));
  CHECK_FALSE(GlobMatch("fc?", "fc12"));
  CHECK(GlobMatch("fc1", "fc1"));
  CHECK_FALSE(GlobMatch("fc1", "fc2"));
  CHECK(GlobMatch("emb_*", "emb_"));
  CHECK(GlobMatch("emb_*", "emb_user"));
  CHECK_FALSE(GlobMatch("emb_*", "emb"));
  CHECK(GlobMatch("a*b*c", "aXXbYYbc"));
  CHECK_FALSE(GlobMatch("a*b*c", "aXXbYYb"));
  CHECK(GlobMatch("[x]", "[x]"));  // brackets are literal
  CHECK_FALSE(GlobMatch("[x]", "x"));
}

TEST_CASE("the first matching rule wins; no match means PS with train.optimizer") {
  Config c = Parse(
      "train: {optimizer: {type: momentum, lr: 0.2}}\n"
      "parameters:\n"
      "  - {match: emb_item, ps: false}\n"
      "  - {match: emb_*, optimizer: {type: adagrad, lr: 0.05}}\n"
      "  - {match: \"*\", ps: true}\n");
  CHECK(FindParameterRule(c, "emb_item") == &c.parameters[0]);
  CHECK(FindParameterRule(c, "emb_user") == &c.parameters[1]);
  CHECK(FindParameterRule(c, "fc1") == &c.parameters[2]);
  CHECK(OptimizerFor(c, "emb_user").type == OptimizerType::kAdagrad);
  CHECK(OptimizerFor(c, "emb_user").lr == doctest::Approx(0.05));
  CHECK(OptimizerFor(c, "emb_item").type == OptimizerType::kMomentum);  // rule without override
  CHECK(OptimizerFor(c, "fc1").lr == doctest::Approx(0.2));

  Config none = Parse("train: {optimizer: {type: adam, lr: 0.3}}\n");
  CHECK(FindParameterRule(none, "w") == nullptr);
  CHECK(OptimizerFor(none, "w").type == OptimizerType::kAdam);
  CHECK(OptimizerFor(none, "w").lr == doctest::Approx(0.3));
}

}  // namespace
}  // namespace pstrain
