// The job's YAML config, parsed and validated once into plain structs.
//
// Nothing else in pstrain reads YAML: roles get these structs. Parsing checks
// every key and every range here, so later code can trust the values. An
// error is one line naming the file, the 1-based line, the dotted key path and
// what was expected:
//   configs/x.yaml:7: train.optimizer.lr: expected a number > 0, got '-1'
//   configs/x.yaml:12: parameters[1].ps: expected true or false, got 'maybe'
// List items are numbered from 0. Unknown keys are errors (a typo must not be
// silently ignored), and so are keys that do not apply to what is chosen
// (`model.layers[2].out: not a key of a maxpool layer`). yaml-cpp stays inside
// src/common's config*.cc; no exception leaves them.
//
// Layout (every section optional; the file holds one YAML document, a mapping;
// every key, its type, default and meaning: docs/configuration.md):
//   model: {input, sparse_fields, device, loss, layers | wide + deep}
//          (fields and defaults: src/common/config/model_config.h)
//   data: {format, train, test, vocab, limit, shuffle}
//   train: {epochs, batch_size, steps, mode, staleness, optimizer, seed,
//           log_every, partition_bytes, checkpoint, recovery, elastic,
//           replication}
//   parameters: [{match, ps, init_in_server, cache_rows, optimizer}, ...]
// configs/ps_example.yaml is a commented example of train and parameters;
// configs/lenet_fashion_mnist.yaml and configs/mlp_fashion_mnist.yaml are
// complete jobs. A null section (`train:` with nothing under it) counts as an
// empty one. A layer may be written as its type alone (`- relu`).
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/common/config/compression_config.h"
#include "src/common/config/model_config.h"
#include "src/common/config/optimizer_config.h"
#include "src/common/config/overrides.h"
#include "src/common/status.h"

namespace pstrain {

// How workers' updates meet on the servers: `sync` waits for every worker
// each step, `async` never waits, `ssp` lets the fastest worker run at most
// `staleness` steps ahead of the slowest (0 = lockstep). `average`
// (parameter averaging): each worker trains its own copy and every
// `average_every` steps the copies are averaged (all-reduced weights) or
// their weight deltas pushed and averaged on the servers (PS weights).
enum class UpdateMode { kSync, kAsync, kSsp, kAverage };

struct CheckpointConfig {
  std::string dir;          // required, non-empty
  int64_t every_steps = 0;  // 0 = only at the end
  bool resume = false;      // start from the newest checkpoint in `dir`
  int keep = 3;             // how many checkpoints to keep, >= 1
  // Also a checkpoint at every epoch end, and the one of the best
  // validation metric kept past `keep` (needs data.validation).
  bool keep_best = false;
};

// Stop training when the validation metric (data.validation, measured at
// each epoch's end) has not improved on its best by more than min_delta
// for `patience` epochs in a row.
struct EarlyStoppingConfig {
  std::string metric;    // accuracy | auc | logloss | rmse; empty: the loss's own
  int patience = 3;      // epochs, >= 1
  double min_delta = 0;  // >= 0
  int line = 0;
};

// What the job does when a node is lost (roles/scheduler/scheduler.h): with
// checkpoints, pause and wait this long for a replacement, then roll every
// node back to the newest complete checkpoint. 0: end the job at once.
struct RecoveryConfig {
  int64_t wait_s = 120;  // 0..604800
  // Rollbacks in a row that one link between two live nodes (a worker and
  // a server, or two workers) may cause with no progress between them (no
  // worker past its furthest step); its next failure ends the job, naming
  // the pair. 0..1000.
  int64_t max_failed_link_rollbacks = 3;
};

// A job whose shape may change while it runs (docs/elastic.md): how many
// workers and servers it may have. A change takes effect at a step every
// worker reaches, through a checkpoint of that step, so an elastic job needs
// train.checkpoint. Unset: the shape is fixed at MS_WORKER_NUM and
// MS_SERVER_NUM.
struct ElasticConfig {
  int min_workers = 1, max_workers = 1;  // 1 <= min <= max <= 65536
  // 0 <= min <= max <= 65536; -1 (servers: unset): fixed at MS_SERVER_NUM.
  int min_servers = -1, max_servers = -1;
};

// Backups of every server's dense partitions on other servers
// (roles/server/replication.h): each applied update reaches `replicas`
// other servers before the workers hear it was taken. 0: none.
struct ReplicationConfig {
  int replicas = 0;  // 0..kMaxReplicas, below the job's server count
  static constexpr int kMaxReplicas = 8;
};

struct TrainConfig {
  int epochs = 1;       // >= 1
  int batch_size = 64;  // per worker, 1..1048576
  int64_t steps = 0;    // 0 = run the epochs
  UpdateMode mode = UpdateMode::kSync;
  int staleness = 0;              // >= 0; must stay 0 unless mode is ssp
  int average_every = 0;          // mode average: steps between averagings, >= 1; else 0
  OptimizerConfig optimizer;      // default for every parameter
  CompressionConfig compression;  // default for every dense parameter
  // > 0: each step's gradient (every trained parameter's, the workers'
  // mean) is scaled by min(1, clip_norm / its global L2 norm) before any
  // optimizer sees it; 0: no clipping. Sync mode only.
  float clip_norm = 0;
  uint64_t seed = 1;
  int log_every = 100;  // steps between progress lines, >= 1
  // Large tensors are split into parts of this size across the servers:
  // 4096..1<<30, a multiple of 4.
  int64_t partition_bytes = 4 << 20;
  std::optional<CheckpointConfig> checkpoint;         // unset: no checkpoints
  std::optional<EarlyStoppingConfig> early_stopping;  // unset: run every epoch
  // Where servers keep the table rows beyond server_cache_rows/bytes, each
  // in a directory of its own; relative: from the config's directory.
  // Empty: pstrain-store under the job's working directory.
  std::string store_dir;
  // Unset: on (default wait) when there are checkpoints, off otherwise.
  std::optional<RecoveryConfig> recovery;
  std::optional<ElasticConfig> elastic;  // unset: a fixed shape
  ReplicationConfig replication;
  // Seconds to wait for a lost node's replacement; 0 when the job cannot
  // recover (no checkpoints, or recovery.wait_s: 0).
  double RecoveryWaitSeconds() const {
    if (!checkpoint) return 0;
    return static_cast<double>(recovery ? recovery->wait_s : RecoveryConfig().wait_s);
  }
  int MaxFailedLinkRollbacks() const {
    return static_cast<int>(recovery ? recovery->max_failed_link_rollbacks
                                     : RecoveryConfig().max_failed_link_rollbacks);
  }
};

// One entry of `parameters:`. Rules are tried in order; the first whose
// pattern matches a parameter's name applies to it.
struct ParameterRule {
  std::string match;            // glob over parameter names: * and ? ("conv*", "emb_?")
  bool ps = true;               // lives on the servers (false: all-reduced among workers)
  bool init_in_server = false;  // servers initialize it (needs ps)
  int64_t cache_rows = 0;       // rows cached on each worker, 0 = none (needs ps)
  // Server-held embedding tables (init_in_server), see embedding/:
  int64_t cache_staleness = 0;    // async/ssp: steps a cached row may be old
  int64_t admit_after = 0;        // a row exists once its id was seen this often
  int64_t evict_after_steps = 0;  // rows untouched this long are dropped, 0: never
  int64_t max_rows = 0;           // rows per server at most, 0: no limit
  // Rows each server keeps in memory, values and optimizer state; the rest
  // wait on local disk (train.store_dir) and nothing is dropped. 0 (both):
  // every row in memory. One of the two, by rows or by bytes.
  int64_t server_cache_rows = 0;
  int64_t server_cache_bytes = 0;
  // Replaces train.optimizer for matching parameters; keys it leaves unset
  // take OptimizerConfig's defaults, not train.optimizer's.
  std::optional<OptimizerConfig> optimizer;
  // Replaces train.compression for matching parameters (dense ones only).
  std::optional<CompressionConfig> compression;
  int line = 0;  // 1-based line of the entry, for messages
};

struct Config {
  std::string source;  // file name, for messages
  // Whether `model:` / `data:` were given; when not, `model` / `data` hold
  // the defaults and a role that needs them must say so.
  bool has_model = false;
  bool has_data = false;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  std::vector<ParameterRule> parameters;
  // Every scalar of the file by key path, as written ("train.optimizer.lr"
  // -> "0.05"): what nodes and checkpoints compare (config_identity.h).
  std::map<std::string, std::string> settings;
};

// Parses `yaml_text` with the command line's `overrides` made to it
// (src/common/config/overrides.h); `source_name` is the file name used in
// messages. Any error is kInvalidArgument.
StatusOr<Config> ParseConfig(const std::string& yaml_text, const std::string& source_name,
                             const ConfigOverrides& overrides = {});

// Reads and parses the file at `path`, as ParseConfig. Relative paths
// under `data:` and train.checkpoint.dir (a --set's too) are taken from the
// config file's directory (ParseConfig keeps them as written). A missing
// file is kNotFound, an unreadable one kInvalidArgument; both messages name
// the path. Data files are not opened here.
StatusOr<Config> LoadConfig(const std::string& path, const ConfigOverrides& overrides = {});

// Whether `name` matches `pattern` as a whole: `*` matches any run of
// characters (also none), `?` exactly one; every other character itself.
bool GlobMatch(const std::string& pattern, const std::string& name);

// Every key the parser accepts, as a dotted path, sections included: "train",
// "train.optimizer", "train.optimizer.lr"; the items of a list as "[]":
// "parameters[].init_in_server", "model.layers[].type". Listed from the same
// field tables that refuse an unknown key, so docs/configuration.md can be
// checked against it (tests/config_docs_test.cc).
std::vector<std::string> KnownConfigKeys();

// The keys each layer type takes besides `type` and `name`, as the parser
// checks them (any other key of a layer is refused for that type).
struct LayerKeys {
  std::string type;  // "linear", "embedding_bag", ...
  std::vector<std::string> required;
  std::vector<std::string> optional;
};
std::vector<LayerKeys> KnownLayerKeys();

// The rule that applies to `name` (the first match), or nullptr: then the
// parameter lives on the servers and uses train.optimizer. The pointer is
// into `config` and lives as long as it.
const ParameterRule* FindParameterRule(const Config& config, const std::string& name);

// The optimizer for `name`: its rule's override, or train.optimizer.
OptimizerConfig OptimizerFor(const Config& config, const std::string& name);

// The compression for `name`: its rule's override, or train.compression.
CompressionConfig CompressionFor(const Config& config, const std::string& name);

// Whether workers join and leave an elastic job live (roles/scheduler/
// live_workers.cc), as far as the config tells: on the CPU, nothing
// compressed, not in mode average; the training data must not be split by
// file either (src/data/dataset.h, SplitsTrainByFile). Otherwise a change
// of workers passes through the checkpoint of its step.
bool ChangesWorkersLive(const Config& config);
// Whether an elastic job finishes the step under way without a lost worker
// (roles/scheduler/lost_worker.cc): such a job in sync mode.
bool FinishesStepsWithoutLostWorkers(const Config& config);
// Whether an elastic job drops a lost worker live at the furthest step the
// others reach, making up the batches it never pushed (the same file): such
// a job in async or ssp mode. Where neither holds, a lost worker sends the
// job back to its newest checkpoint.
bool DropsLostWorkersLive(const Config& config);

}  // namespace pstrain
