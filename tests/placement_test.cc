// Where each parameter of a config's model lives (roles/placement/placed_model.h):
// on the servers, all-reduced among the workers (ps: false), or a table the
// servers hold row by row (init_in_server); and the checkpoint's model layout
// (roles/checkpoint/model_layout.h) places them the same way.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "roles/checkpoint/model_layout.h"
#include "roles/placement/placed_model.h"
#include "src/common/config/config.h"
#include "src/nn/model.h"

namespace pstrain {
namespace {

// This file's repository, as tests/train_util.cc finds it.
std::string RepoPath(const std::string& relative) {
  const std::string here = __FILE__;
  return here.substr(0, here.rfind("tests/")) + relative;
}

Config Load(const std::string& name) {
  auto config = LoadConfig(RepoPath("configs/" + name));
  REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  return *config;
}

PlacedModel Place(const Config& config, int max_batch) {
  auto placed = PlaceModel(config, max_batch);
  REQUIRE_MESSAGE(placed.ok(), placed.status().ToString());
  return std::move(*placed);
}

const char* PlaceName(ParamPlace place) {
  switch (place) {
    case ParamPlace::kServers:
      return "servers";
    case ParamPlace::kAllReduced:
      return "allreduced";
    case ParamPlace::kServerTable:
      return "table";
  }
  return "?";
}

// "name:place" for every parameter, in the model's order.
std::vector<std::string> Places(const PlacedModel& placed) {
  std::vector<std::string> out;
  for (const PlacedParam& p : placed.params)
    out.push_back(p.param->name + ":" + PlaceName(p.place));
  return out;
}

std::vector<std::string> Names(const std::vector<Param*>& params) {
  std::vector<std::string> out;
  for (const Param* p : params) out.push_back(p->name);
  return out;
}

// The placement covers the built model's parameters one for one, in order.
void CheckCoversModel(const PlacedModel& placed) {
  const std::vector<Param*>& params = placed.model->params();
  REQUIRE(placed.params.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) CHECK(placed.params[i].param == params[i]);
}

// The layout a checkpoint writes names the same weights in the same places,
// and the same tables.
void CheckLayoutAgrees(const Config& config, const PlacedModel& placed) {
  auto layout = LayoutOf(config);
  REQUIRE_MESSAGE(layout.ok(), layout.status().ToString());
  std::vector<std::string> dense;
  for (const PlacedParam& p : placed.params)
    if (p.place != ParamPlace::kServerTable)
      dense.push_back(p.param->name + ":" + PlaceName(p.place));
  std::vector<std::string> laid_out;
  for (const LayoutTensor& t : layout->tensors)
    laid_out.push_back(t.name + ":" +
                       (t.place == WeightPlace::kServers ? "servers" : "allreduced"));
  CHECK(laid_out == dense);
  REQUIRE(layout->tables.size() == placed.tables.size());
  for (size_t t = 0; t < placed.tables.size(); ++t) {
    CHECK(layout->tables[t].name == placed.tables[t].options.name);
    CHECK(layout->tables[t].dim == placed.tables[t].options.dim);
  }
}

TEST_CASE("hybrid LeNet: the convolutions on the servers, the fully connected layers all-reduced") {
  const Config config = Load("lenet_hybrid.yaml");
  const PlacedModel placed = Place(config, 64);
  CheckCoversModel(placed);
  CHECK(Places(placed) == std::vector<std::string>{"conv1.weight:servers", "conv1.bias:servers",
                                                   "conv2.weight:servers", "conv2.bias:servers",
                                                   "fc1.weight:allreduced", "fc1.bias:allreduced",
                                                   "fc2.weight:allreduced", "fc2.bias:allreduced",
                                                   "fc3.weight:allreduced", "fc3.bias:allreduced"});
  CHECK(placed.tables.empty());
  CHECK(Names(placed.ParamsAt(ParamPlace::kServers)) ==
        std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias"});
  CHECK(placed.ParamsAt(ParamPlace::kAllReduced).size() == 6);
  CHECK(placed.ParamsAt(ParamPlace::kServerTable).empty());
  // Without tables the model is the config's, weights and all.
  auto plain = Model::Build(config.model, config.train.seed);
  REQUIRE(plain.ok());
  for (size_t i = 0; i < placed.params.size(); ++i) {
    CHECK(placed.params[i].param->value.shape == (*plain)->params()[i]->value.shape);
    CHECK(placed.params[i].param->value.data == (*plain)->params()[i]->value.data);
  }
  CheckLayoutAgrees(config, placed);
}

TEST_CASE("Wide&Deep: both embedding tables on the servers, one batch's rows tall in the model") {
  const Config config = Load("wide_deep_criteo.yaml");
  const PlacedModel placed = Place(config, 4);
  CheckCoversModel(placed);
  CHECK(Places(placed) == std::vector<std::string>{"wide_emb.weight:table", "deep_emb.weight:table",
                                                   "fc1.weight:allreduced", "fc1.bias:allreduced",
                                                   "fc2.weight:allreduced", "fc2.bias:allreduced",
                                                   "fc3.weight:allreduced", "fc3.bias:allreduced"});
  REQUIRE(placed.tables.size() == 2);
  CHECK(placed.tables[0].options.name == "wide_emb.weight");
  CHECK(placed.tables[0].options.dim == 1);
  CHECK(placed.tables[0].options.vocab == 1048576);  // the servers' table: every id
  CHECK(placed.tables[1].options.name == "deep_emb.weight");
  CHECK(placed.tables[1].options.dim == 16);
  CHECK(placed.tables[1].cache_rows == 100000);  // kept for the worker to use or not
  CHECK(placed.params[0].table == 0);
  CHECK(placed.params[1].table == 1);
  CHECK(placed.TableParam(0) == placed.params[0].param);
  CHECK(placed.TableParam(1) == placed.params[1].param);
  // The model holds 4 samples x 26 fields rows of each table; the config the
  // caller gave is untouched.
  CHECK(placed.TableParam(0)->value.shape == Shape{104, 1});
  CHECK(placed.TableParam(1)->value.shape == Shape{104, 16});
  CHECK(placed.model_config.wide[0].vocab == 104);
  CHECK(placed.model_config.deep[0].vocab == 104);
  CHECK(config.model.wide[0].vocab == 1048576);
  CHECK(placed.ParamsAt(ParamPlace::kServers).empty());
  CheckLayoutAgrees(config, placed);
}

TEST_CASE("the update mode does not move anything: placement is the same in sync and async") {
  Config sync = Load("wide_deep_criteo.yaml");
  Config async = sync;
  async.train.mode = UpdateMode::kAsync;
  const PlacedModel a = Place(sync, 8);
  const PlacedModel b = Place(async, 8);
  CHECK(Places(a) == Places(b));
  REQUIRE(a.tables.size() == b.tables.size());
  for (size_t t = 0; t < a.tables.size(); ++t)
    CHECK(a.TableParam(t)->value.shape == b.TableParam(t)->value.shape);
}

TEST_CASE("pure PS: every weight on the servers, a worker-held embedding at its full size") {
  const Config config = Load("lr_criteo.yaml");
  const PlacedModel placed = Place(config, 512);
  CheckCoversModel(placed);
  CHECK(Places(placed) == std::vector<std::string>{"wide.weight:servers", "dense.weight:servers",
                                                   "dense.bias:servers"});
  CHECK(placed.tables.empty());
  CHECK(placed.params[0].param->value.shape == Shape{1048576, 1});
  CheckLayoutAgrees(config, placed);

  const Config lenet = Load("lenet_fashion_mnist.yaml");
  const PlacedModel all_ps = Place(lenet, 64);
  CHECK(all_ps.ParamsAt(ParamPlace::kServers).size() == all_ps.params.size());
  CHECK(all_ps.params.size() == 10);
}

// A small Wide&Deep with all three places: server tables, a ps: false layer,
// and one no rule matches (the servers, by default).
const char* const kMixed = R"(model:
  input: [2]
  sparse_fields: 3
  loss: bce_with_logits
  wide:
    - {name: w, type: embedding_bag, vocab: 1000, dim: 1, mode: sum, init: zeros}
  deep:
    - {name: d, type: embedding_bag, vocab: 1000, dim: 4, mode: concat}
    - concat
    - {name: hidden, type: linear, out: 8}
    - relu
    - {name: out, type: linear, out: 1}
data: {format: criteo, train: day_0.txt}
train: {batch_size: 2, seed: 3}
parameters:
  - {match: "w.weight", init_in_server: true}
  - {match: "d.weight", init_in_server: true}
  - {match: "hidden.*", ps: false}
)";

TEST_CASE("all three places in one model; max_batch sizes only the tables") {
  auto config = ParseConfig(kMixed, "mixed.yaml");
  REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  const PlacedModel placed = Place(*config, 5);
  CheckCoversModel(placed);
  CHECK(Places(placed) == std::vector<std::string>{
                              "w.weight:table", "d.weight:table", "hidden.weight:allreduced",
                              "hidden.bias:allreduced", "out.weight:servers", "out.bias:servers"});
  CHECK(placed.TableParam(0)->value.shape == Shape{15, 1});
  CHECK(placed.TableParam(1)->value.shape == Shape{15, 4});
  const PlacedModel bigger = Place(*config, 50);
  CHECK(bigger.TableParam(1)->value.shape == Shape{150, 4});
  CHECK(bigger.params[2].param->value.shape == placed.params[2].param->value.shape);
  CheckLayoutAgrees(*config, placed);
}

TEST_CASE("errors name the config line, or the model's problem") {
  // A linear weight cannot be a server-held table.
  std::string bad = kMixed;
  bad.replace(bad.find("hidden.*\", ps: false"), std::string("hidden.*\", ps: false").size(),
              "hidden.weight\", init_in_server: true");
  auto config = ParseConfig(bad, "bad.yaml");
  REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  auto placed = PlaceModel(*config, 2);
  REQUIRE_FALSE(placed.ok());
  CHECK(placed.status().message().find("bad.yaml:") == 0);
  CHECK(placed.status().message().find(
            "only an embedding_bag's weight can be a server-held table") != std::string::npos);
  auto layout = LayoutOf(*config);
  REQUIRE_FALSE(layout.ok());
  CHECK(layout.status().message() == placed.status().message());

  // No model: the model's own error, with the config's name.
  auto empty = ParseConfig("data: {format: criteo, train: day_0.txt}\n", "empty.yaml");
  REQUIRE_MESSAGE(empty.ok(), empty.status().ToString());
  auto none = PlaceModel(*empty, 2);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("empty.yaml") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
