// data.columns[].table: the columns that name an embedding_bag are the only
// ones it reads, and their ids hash into its vocab (docs/configuration.md,
// "Which table reads which column"): the config binding and its mistakes,
// the parser's ids, the layer's lookups, a batch's numbering per set of
// columns for tables on the servers, and the data check per table.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "roles/placement/id_groups.h"
#include "roles/placement/server_tables.h"
#include "roles/worker/data_fit.h"
#include "src/common/config/config.h"
#include "src/data/criteo_reader.h"
#include "src/data/schema_reader.h"
#include "src/nn/layer.h"
#include "src/nn/model.h"
#include "tests/config_test_util.h"

namespace pstrain {
namespace {

using testing::ErrorOf;
using testing::Parse;

// A wide & deep model whose wide table reads the crossed column and whose
// deep table reads user and item; `wide`, `deep` and `columns` replace
// their parts.
std::string TwoTables(const std::string& user_tables = "deep", const std::string& extra = "",
                      const std::string& wide_vocab = "1000") {
  return "model:\n  input: [1]\n  sparse_fields: 4\n  loss: bce_with_logits\n"
         "  wide:\n    - {name: crosses, type: embedding_bag, vocab: " +
         wide_vocab +
         ", dim: 1}\n"
         "  deep:\n    - {name: deep, type: embedding_bag, vocab: 50, dim: 2, mode: concat}\n"
         "    - concat\n    - {type: linear, out: 1}\n" +
         extra +
         "data:\n  format: csv\n  train: a\n  vocab: 7\n  columns:\n"
         "    - {name: click, type: label}\n"
         "    - {name: user, type: categorical, table: " +
         user_tables +
         "}\n"
         "    - {name: price, type: dense}\n"
         "    - {name: items, type: multi_hot, max_ids: 2, table: deep}\n"
         "    - {name: user_x_item, type: categorical, table: crosses}\n";
}

TEST_CASE("each table reads the slots of the columns that name it, hashed into its vocab") {
  const Config config = Parse(TwoTables());
  REQUIRE(config.model.wide[0].slots == std::vector<int>{3});
  REQUIRE(config.model.deep[0].slots == std::vector<int>{0, 1, 2});
  CHECK(config.data.columns[1].vocab == 50);
  CHECK(config.data.columns[3].vocab == 50);
  CHECK(config.data.columns[4].vocab == 1000);

  // The parser hashes each value with its field index into its tables'
  // vocab, not data.vocab (7).
  const RowParser parser = RowParser::For(config.data);
  float label = 0, dense = 0;
  int64_t ids[4];
  float weights[4];
  REQUIRE(parser.Parse("1,u9,3.5,a|b,u9_a", &label, &dense, ids, weights).ok());
  CHECK(ids[0] == static_cast<int64_t>(CriteoHash(0, "u9") % 50));
  CHECK(ids[1] == static_cast<int64_t>(CriteoHash(1, "a") % 50));
  CHECK(ids[2] == static_cast<int64_t>(CriteoHash(1, "b") % 50));
  CHECK(ids[3] == static_cast<int64_t>(CriteoHash(2, "u9_a") % 1000));
  CHECK(CriteoHash(2, "u9_a") % 1000 >= 50);  // so data.vocab or 50 would give another id

  // The exported schema says so.
  const std::string json = SchemaJson(config.data);
  CHECK(json.find("\"name\":\"user_x_item\",\"type\":\"categorical\",\"field\":2,\"first_slot\":3,"
                  "\"slots\":1,\"ids\":\"hash\",\"vocab\":1000,\"tables\":[\"crosses\"]") !=
        std::string::npos);

  // Raw ids must be below the tables' vocab.
  std::string raw_text = TwoTables();
  raw_text.replace(raw_text.find("table: crosses"), 14, "ids: raw, table: crosses");
  const Config raw = Parse(raw_text);
  const RowParser raw_parser = RowParser::For(raw.data);
  CHECK(raw_parser.Parse("1,u,1,a,999", &label, &dense, ids, weights).ok());
  CHECK(raw_parser.Parse("1,u,1,a,1000", &label, &dense, ids, weights).message() ==
        "user_x_item id '1000': expected an integer in [0, 1000) (ids: raw)");

  // A column may feed both towers when their vocab agree.
  const Config both = Parse(TwoTables("[deep, crosses]", "", "50"));
  CHECK(both.model.wide[0].slots == std::vector<int>{0, 3});
  CHECK(both.model.deep[0].slots == std::vector<int>{0, 1, 2});
}

TEST_CASE("mistakes in table: name the column and what is wrong") {
  CHECK(ErrorOf(TwoTables("dep")) ==
        "x.yaml:17: data.columns[1].table: 'dep' is not an embedding_bag layer of the model "
        "(those are 'crosses', 'deep')");
  CHECK(ErrorOf(TwoTables("[deep, crosses]")) ==
        "x.yaml:17: data.columns[1].table: 'deep' has vocab 50 and 'crosses' vocab 1000: the "
        "tables a column's ids go to need the same vocab");
  CHECK(ErrorOf(TwoTables("[deep, deep]")) ==
        "x.yaml:17: data.columns[1].table: names 'deep' twice");
  std::string unnamed = TwoTables();
  unnamed.replace(unnamed.find(", table: deep}"), 13, "");
  CHECK(ErrorOf(unnamed) ==
        "x.yaml:17: data.columns[1]: names no table, while other columns do (table:): name the "
        "embedding_bag layers that read each id column");
  std::string unread = TwoTables("crosses", "", "50");
  unread.replace(unread.find("max_ids: 2, table: deep"), 23, "max_ids: 2, table: crosses");
  CHECK(ErrorOf(unread) ==
        "x.yaml:15: data.columns: no column names embedding_bag 'deep' in table:, so it would read "
        "nothing; name it in the columns it reads");
  std::string on_dense = TwoTables();
  on_dense.replace(on_dense.find("type: dense}"), 12, "type: dense, table: deep}");
  CHECK(ErrorOf(on_dense) == "x.yaml:18: data.columns[2].table: not a key of a dense column");
  // Only a list's first layer reads the ids: refused before any column is
  // bound to it.
  std::string late = TwoTables();
  late.replace(late.find("    - concat\n"), 13,
               "    - concat\n    - {name: late, type: embedding_bag, vocab: 5, dim: 1}\n");
  CHECK(ErrorOf(late) ==
        "x.yaml:10: model.deep[2]: embedding_bag reads the sample's ids, so it must come first in "
        "its list");
  // (Without the multi_hot column, which the GPU refuses first.)
  std::string gpu = TwoTables("deep", "  device: gpu\n");
  gpu.replace(gpu.find("type: multi_hot, max_ids: 2"), 27, "type: categorical");
  gpu.replace(gpu.find("sparse_fields: 4"), 16, "sparse_fields: 3");
  CHECK(ErrorOf(gpu) ==
        "x.yaml:16: data.columns: columns that name their tables (table:) are not read on the GPU "
        "yet; use device: cpu or leave out table:");
}

TEST_CASE("an embedding_bag with slots looks up only those, in their order") {
  LayerConfig c;
  c.type = LayerType::kEmbeddingBag;
  c.name = "t";
  c.vocab = 4;
  c.dim = 2;
  c.mode = "concat";
  c.init = "zeros";
  c.slots = {2, 0};
  auto layer = MakeLayer(c);
  REQUIRE(layer.ok());
  auto shape = (*layer)->Build({3}, 1);
  REQUIRE(shape.ok());
  CHECK(*shape == Shape{4});  // 2 slots x dim 2
  Param* w = (*layer)->Params()[0];
  for (int64_t i = 0; i < 8; ++i) w->value.data[static_cast<size_t>(i)] = static_cast<float>(i);
  Batch batch;
  batch.fields = 3;
  batch.sparse = {1, 9, 3, 0, 9, 2};  // slot 1 (9) is another table's, out of this one's range
  batch.labels = {0, 0};
  Tensor out;
  (*layer)->Forward(batch, Tensor(), &out, false);
  CHECK(std::vector<float>(out.data.begin(), out.data.end()) ==
        std::vector<float>{6, 7, 2, 3, 4, 5, 0, 1});

  c.slots = {3};
  auto wrong = MakeLayer(c);
  REQUIRE(wrong.ok());
  CHECK((*wrong)->Build({3}, 1).status().message() ==
        "embedding_bag reads id slot 3 of a sample's 3");
}

TEST_CASE("a batch's ids are numbered per set of slots the server-held tables read") {
  auto groups = IdGroups::Make({{1, 2}, {0}, {2, 1}}, 3);
  REQUIRE(groups.ok());
  std::vector<int64_t> ids = {10, 5, 6, 10, 6, 5, 11, 5, 5};
  groups->Reset(ids.data(), ids.size(), /*renumber=*/true);
  CHECK(groups->unique(0) == std::vector<int64_t>{5, 6});
  CHECK(groups->unique(2) == std::vector<int64_t>{5, 6});
  CHECK(groups->unique(1) == std::vector<int64_t>{10, 11});
  CHECK(ids == std::vector<int64_t>{0, 0, 1, 0, 1, 0, 1, 0, 0});

  // All slots: the whole batch, as without table:.
  auto all = IdGroups::Make({{}, {}}, 2);
  REQUIRE(all.ok());
  std::vector<int64_t> flat = {7, 3, 3, 9};
  all->Reset(flat.data(), flat.size(), /*renumber=*/false);
  CHECK(all->unique(1) == std::vector<int64_t>{7, 3, 9});
  CHECK(flat == std::vector<int64_t>{7, 3, 3, 9});

  CHECK_FALSE(IdGroups::Make({{0, 1}, {1, 2}}, 3).ok());
  CHECK_FALSE(IdGroups::Make({{}, {1}}, 3).ok());

  // Server-held tables that share some columns but not all are refused.
  const std::string rules =
      "parameters:\n  - {match: \"crosses.weight\", init_in_server: true}\n"
      "  - {match: \"deep.weight\", init_in_server: true}\n";
  const Config overlapping = Parse(TwoTables("[deep, crosses]", "", "50") + rules);
  CHECK(ServerTables(overlapping).status().message() ==
        "x.yaml: data.columns: column 'user' is read by the server-held tables 'crosses.weight' "
        "and 'deep.weight', which read different columns otherwise (table:): a worker numbers a "
        "batch's ids once per set of columns, so tables on the servers read the same columns or "
        "none in common");
  auto disjoint = ServerTables(Parse(TwoTables() + rules));
  REQUIRE(disjoint.ok());
  CHECK((*disjoint)[0].slots == std::vector<int>{3});
  CHECK((*disjoint)[1].slots == std::vector<int>{0, 1, 2});
}

TEST_CASE("each id is checked against the tables that read its slot") {
  const Config config = Parse(TwoTables());
  auto model = Model::Build(config.model, 1);
  REQUIRE(model.ok());
  const ModelReads reads = ModelReadsOf(config.model, (*model)->output_shape());
  Dataset data;
  data.sample_shape = {1};
  data.dense = {0};
  data.fields = 4;
  data.sparse = {49, 0, 0, 999};  // each below its own table's vocab
  data.labels = {1};
  CHECK(CheckFit(reads, data, "f", "f").ok());
  data.sparse = {50, 0, 0, 999};
  CHECK(CheckFit(reads, data, "f", "f").message() ==
        "model.deep[0].vocab is 50 rows, but f has id 50 (sample 0, field 0): the columns that "
        "name a table hash into its vocab");
}

}  // namespace
}  // namespace pstrain
