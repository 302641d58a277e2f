// EmbeddingTableOptions: everything that defines one sparse embedding table,
// as a plain struct filled once by the config layer and checked by Validate().
// The same options go to every server that holds a share of the table and to
// the workers that cache its rows; nothing here reads YAML or the environment.
#pragma once

#include <cstdint>
#include <string>

#include "src/common/config/optimizer_config.h"
#include "src/common/status.h"

namespace pstrain {

// How a row's values start (see row_init.h): normal(0, init_scale^2),
// uniform in [-init_scale, init_scale), or all zeros.
enum class EmbeddingInit { kNormal, kUniform, kZeros };

struct EmbeddingTableOptions {
  std::string name;  // names the table in every error and log line
  int dim = 0;       // floats per row, > 0
  // Valid ids are [0, vocab); 0: any id >= 0 (ids are hashed features).
  int64_t vocab = 0;
  // Row values are a function of (seed, id) only. Tables that should differ
  // need different seeds (e.g. StreamKey(job seed, name)).
  uint64_t seed = 0;
  EmbeddingInit init = EmbeddingInit::kNormal;
  float init_scale = 0.01f;
  OptimizerConfig optimizer;  // the hyperparameters of optim/dense_optimizer.h
  // A row is created at the lookup that sees its id for the admit_after-th
  // time; before that the id reads as zeros and its gradients are dropped.
  // 0 or 1: created at the first lookup.
  int64_t admit_after = 0;
  // Ids not yet admitted whose sightings are remembered, at most; past it the
  // counts age (halve) and ids seen once are forgotten. Used when
  // admit_after > 1.
  int64_t max_pending_ids = int64_t{1} << 20;
  // Rows untouched for more than this many steps are removed by
  // SparseTable::EvictUntouched; 0: never.
  int64_t evict_after_steps = 0;
  // Rows one server keeps at most; a new row past it evicts the least
  // recently touched row. 0: unlimited.
  int64_t max_rows = 0;

  // OK, or InvalidArgument naming the table, the field and its value
  // ("embedding table 'emb_user': dim must be > 0, got 0"); the optimizer's
  // fields are checked as by ValidateOptimizerConfig.
  Status Validate() const;
};

// "normal" / "uniform" / "zeros"; InvalidArgument for anything else.
StatusOr<EmbeddingInit> ParseEmbeddingInit(const std::string& text);
const char* EmbeddingInitName(EmbeddingInit init);

}  // namespace pstrain
