// The text of `pstrain --help`: the subcommands (from main's table), the
// roles, and every flag with its variable (from the parser's own table,
// src/common/config/options.cc), so the help cannot drift from what is parsed.
#pragma once

#include <string>
#include <vector>

#include "src/app/cli.h"

namespace pstrain {
std::string UsageText(const std::vector<Subcommand>& subcommands);
}
