// Per-node loggers. There is no global logger: each node (scheduler, server,
// worker) gets its own, passed in its context, so nodes running as threads of
// one process (tests, `pstrain local`) keep their lines apart by name.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>
#include <vector>

namespace pstrain {

using Logger = std::shared_ptr<spdlog::logger>;

// A logger named `name` writing to stderr (the launch scripts redirect it to
// the node's log file), plus any extra sinks (tests capture lines this way).
Logger MakeLogger(const std::string& name, std::vector<spdlog::sink_ptr> extra_sinks = {});

}  // namespace pstrain
