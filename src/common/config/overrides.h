// Changes to a job's config from the command line, made to the YAML tree
// before it is read, so that an overriding value is checked exactly as the
// same value in the file would be, and is part of the config every node of
// the job must share (src/common/config/identity.h):
//   --set KEY=VALUE  KEY is a key's path as docs/configuration.md writes it
//                    (train.optimizer.lr, data.train, parameters[1].ps:
//                    `[i]` picks an item of a list the file has), VALUE any
//                    YAML value (2, adam, [a.txt, b.txt], {type: sgd}).
//                    Mappings on the way are made when missing; the sets
//                    apply in order, so a later one wins.
//   --resume         train.checkpoint.resume: true; the file must have a
//                    train.checkpoint to resume from.
// An error about a key a --set wrote names it as "--set KEY" instead of a
// line of the file.
#pragma once

#include <string>
#include <vector>

#include "src/common/status.h"

namespace YAML {
class Node;
}

namespace pstrain {

struct ConfigOverrides {
  std::vector<std::string> sets;  // "KEY=VALUE", in command-line order
  bool resume = false;
  bool empty() const { return sets.empty() && !resume; }
};

// At most this many --set: each is a walk of the tree.
inline constexpr size_t kMaxConfigSets = 1024;

// Checks each --set's form (a key path, '=', a YAML value) before any file
// is read: the error names the --set and what is wrong with it.
Status CheckOverrides(const ConfigOverrides& overrides);

namespace config_internal {

// Applies `overrides` to the document `root` (a mapping; reference
// semantics, as yaml-cpp's). `source` names the config file for errors.
Status ApplyOverrides(const ConfigOverrides& overrides, const std::string& source, YAML::Node root);

}  // namespace config_internal
}  // namespace pstrain
