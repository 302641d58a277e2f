// What makes two configs the same job: the texts nodes compare at
// registration and checkpoints carry, and the line that names how two differ.
//
// A config's settings (Config::settings) are every scalar of its file by key
// path, as written ("train.optimizer.lr" -> "0.05", "model.layers[3].type" ->
// "relu"). Two texts are built from them, "key: value" lines in key order:
//
// - JobConfigText: what every node of one job must share. All settings but
//   the node-local ones (kNodeLocalKeys): where a node finds its data files
//   and writes its checkpoints and table store may differ from host to host.
//   The scheduler refuses a node whose text differs from its own (or, when
//   it was started without a config, from the first node's).
// - JobIdentityText: what a checkpoint belongs to. The settings that decide
//   the model a checkpoint holds: the model, optimizers and compression,
//   update mode, seed, batch size, parameter placement and the data (format
//   and file names, not their directories). Left out, so that a job can be
//   resumed with them changed: how long it runs (epochs, steps), logging,
//   checkpoint and recovery settings, partition size, and the memory given
//   to caches (cache_rows, server_cache_rows, server_cache_bytes).
//
// A config built in code, not read from a file, has no settings: its texts
// are empty, and equal to each other's.
#pragma once

#include <string>

#include "src/common/config/config.h"
#include "src/common/settings_text.h"

namespace pstrain {

// Key paths left out of JobConfigText, and what each is for.
inline constexpr const char* kNodeLocalKeys[] = {
    "data.train",            // a worker's data files (its shard)
    "data.test",             // the files it evaluates on
    "train.checkpoint.dir",  // where it mounts the shared checkpoint directory
    "train.store_dir",       // a server's local disk for table rows
};

// Past kMaxJobConfigText bytes (a config of very many parameters: rules),
// a single line "config.digest: <64-bit hash of the text>" stands for it, so
// that registering stays well inside a frame header: a difference is then
// found but not named.
inline constexpr size_t kMaxJobConfigText = size_t{256} << 10;
std::string JobConfigText(const Config& config);
std::string JobIdentityText(const Config& config);

}  // namespace pstrain
