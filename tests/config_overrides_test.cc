// --set KEY=VALUE and --resume (src/common/config/overrides.h): a changed
// key reads as the same value in the file would, errors name the --set,
// and the change is part of what every node must share.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "src/common/config/config.h"
#include "src/common/config/identity.h"
#include "src/common/config/options.h"
#include "tests/config_test_util.h"

namespace pstrain {
namespace {

using testing::TempFile;

const char* const kBase = R"(model: {input: [4], layers: [{type: linear, out: 2}]}
train:
  epochs: 3
  optimizer: {type: sgd, lr: 0.1}
  checkpoint: {dir: ck, every_steps: 10}
parameters:
  - {match: "a*", ps: true}
  - {match: "*", ps: false}
)";

StatusOr<Config> With(std::vector<std::string> sets, bool resume = false,
                      const std::string& yaml = kBase) {
  return ParseConfig(yaml, "x.yaml", ConfigOverrides{std::move(sets), resume});
}

Config Changed(std::vector<std::string> sets, bool resume = false) {
  auto config = With(std::move(sets), resume);
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

std::string ErrorOf(std::vector<std::string> sets, bool resume = false,
                    const std::string& yaml = kBase) {
  auto config = With(std::move(sets), resume, yaml);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == StatusCode::kInvalidArgument);
  return config.status().message();
}

TEST_CASE("a --set replaces a key, makes missing sections, and a later one wins") {
  Config c = Changed({"train.epochs=7", "train.optimizer.lr=0.5", "train.steps=40",
                      "train.replication.replicas=1", "train.steps=50"});
  CHECK(c.train.epochs == 7);
  CHECK(c.train.optimizer.type == OptimizerType::kSgd);  // the rest of the mapping stays
  CHECK(c.train.optimizer.lr == doctest::Approx(0.5));
  CHECK(c.train.steps == 50);
  CHECK(c.train.replication.replicas == 1);
  c = Changed({"train.optimizer={type: adamw, lr: 0.001, warmup_steps: 10}",
               "parameters[1].ps=true", "data.train=[a.txt, b.txt]", "data.format=criteo"});
  CHECK(c.train.optimizer.type == OptimizerType::kAdamW);
  CHECK(c.train.optimizer.warmup_steps == 10);
  REQUIRE(c.parameters.size() == 2);
  CHECK(c.parameters[1].ps);
  CHECK(c.data.train == std::vector<std::string>{"a.txt", "b.txt"});
}

TEST_CASE("a value a --set wrote is checked as the file's, and the error names the --set") {
  CHECK(ErrorOf({"train.epochs=many"}) ==
        "x.yaml: train.epochs (from --set): expected an integer >= 1, got 'many'");
  CHECK(ErrorOf({"train.optimizer={type: rmsprop, alpha: 2}"}) ==
        "x.yaml: train.optimizer.alpha (from --set): expected a number in [0, 1), got '2'");
  CHECK(ErrorOf({"train.epoch=2"})
            .find("x.yaml: train.epoch (from --set): unknown key (allowed: epochs") == 0);
  CHECK(ErrorOf({"parameters[2].ps=true"}) ==
        "--set parameters[2].ps: parameters has no item 2: x.yaml lists 2");
  CHECK(ErrorOf({"train.epochs.x=1"}) ==
        "--set train.epochs.x: train.epochs in x.yaml is not a mapping");
  CHECK(ErrorOf({"train.epochs=[1"}).find("--set train.epochs: '[1' is not a YAML value") == 0);
  // A mapping a --set made is named as from it too.
  CHECK(ErrorOf({"train.checkpoint.every_steps=5"}, false, "train: {epochs: 1}\n") ==
        "x.yaml: train.checkpoint.dir (from --set): required key is missing");
  // A value that aliases itself, or one that multiplies by aliases.
  CHECK(ErrorOf({"train.epochs=&a [*a]"}).find("nests deeper than 32") != std::string::npos);
  std::string huge = "[&a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]";
  for (const char* level : {"a", "b", "c"}) {  // each level ten of the one before
    huge += std::string(", &") + static_cast<char>(level[0] + 1) + " [";
    for (int i = 0; i < 10; ++i) huge += std::string(i ? ", *" : "*") + level;
    huge += "]";
  }
  CHECK(ErrorOf({"train.epochs=" + huge + "]"}).find("holds more than 10000 values") !=
        std::string::npos);
  CHECK(ErrorOf({"train.epochs=\x01"}).find("control character 0x01") != std::string::npos);
  // The file's own mistakes keep their lines.
  CHECK(ErrorOf({"train.epochs=2"}, false, "train:\n  steps: -1\n") ==
        "x.yaml:2: train.steps: expected an integer >= 0, got '-1'");
}

TEST_CASE("a --set of the wrong form is refused before any file is read") {
  for (const char* bad :
       {"train.epochs", "=2", "train..epochs=2", "train.ep-ochs=2", "parameters[x].ps=1",
        "parameters[1.ps=1", "parameters[9999999999].ps=1"}) {
    CAPTURE(bad);
    const Status st = CheckOverrides(ConfigOverrides{{bad}, false});
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message().find(std::string("--set '") + bad + "'") == 0);
  }
  CHECK(CheckOverrides(ConfigOverrides{std::vector<std::string>(kMaxConfigSets + 1, "a=1"), false})
            .message()
            .find("at most") != std::string::npos);
}

TEST_CASE("--resume resumes the file's checkpoint, and needs one") {
  Config c = Changed({}, /*resume=*/true);
  REQUIRE(c.train.checkpoint);
  CHECK(c.train.checkpoint->resume);
  CHECK(c.train.checkpoint->every_steps == 10);
  CHECK(ErrorOf({}, true, "train: {epochs: 1}\n") ==
        "--resume: x.yaml has no train.checkpoint to resume from (add one, with its dir)");
  // A --set may give the checkpoint it resumes.
  auto made = With({"train.checkpoint={dir: elsewhere}"}, true, "train: {epochs: 1}\n");
  REQUIRE(made.ok());
  CHECK(made->train.checkpoint->resume);
  CHECK(made->train.checkpoint->dir == "elsewhere");
}

TEST_CASE("nodes given different --set do not share a config; the same --set does") {
  const std::string base = JobConfigText(Changed({}));
  CHECK(JobConfigText(Changed({"train.optimizer.lr=0.2"})) != base);
  CHECK(JobConfigText(Changed({"train.optimizer.lr=0.1"})) == JobConfigText(Changed({})));
}

TEST_CASE("a --set path is taken from the config file's directory, as the file's") {
  TempFile file(kBase);
  auto c = LoadConfig(file.path(),
                      ConfigOverrides{{"data={format: criteo, train: [days/0.txt]}"}, false});
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  const std::string dir = std::filesystem::path(file.path()).parent_path().string();
  CHECK(c->data.train == std::vector<std::string>{dir + "/days/0.txt"});
}

TEST_CASE("local and a role take --set (repeatable) and --resume") {
  auto local = ParseLocalOptions(
      {"--config", "x.yaml", "--set", "train.epochs=2", "--set=train.steps=5", "--resume"},
      [](const std::string&) { return std::optional<std::string>(); });
  REQUIRE(local.ok());
  CHECK(local->config_overrides.sets ==
        std::vector<std::string>{"train.epochs=2", "train.steps=5"});
  CHECK(local->config_overrides.resume);
  auto plain =
      ParseLocalOptions({}, [](const std::string&) { return std::optional<std::string>(); });
  REQUIRE(plain.ok());
  CHECK(plain->config_overrides.empty());
  const std::map<std::string, std::string> env = {{"MS_ROLE", "MS_WORKER"},
                                                  {"MS_SERVER_NUM", "1"},
                                                  {"MS_WORKER_NUM", "1"},
                                                  {"MS_SCHED_HOST", "127.0.0.1"},
                                                  {"MS_SCHED_PORT", "8000"}};
  auto lookup = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto node = ParseNodeOptions({"--set", "train.epochs=2"}, lookup);
  REQUIRE(node.ok());
  CHECK(node->config_overrides.sets == std::vector<std::string>{"train.epochs=2"});
  CHECK_FALSE(node->config_overrides.resume);
  auto bad = ParseNodeOptions({"--set", "epochs"}, lookup);
  CHECK(bad.status().message().find("--set 'epochs': expected KEY=VALUE") == 0);
  CHECK_FALSE(ParseNodeOptions({"--resume=false"}, lookup).ok());
}

}  // namespace
}  // namespace pstrain
