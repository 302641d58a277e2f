// Per-node loggers. There is no global logger: each node (scheduler, server,
// worker) gets its own, passed in its context, so nodes running as threads of
// one process (tests, `pstrain local`) keep their lines apart by label.
//
// A line reads `[time] [label] [level] text`. The label starts as the role word
// (`worker`) and becomes role and rank (`worker 1`) once the node has
// registered, so a user can tell from any line which rank wrote it.
// Components keep copies of a node's Logger, so the label changes in place.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pstrain {

using Logger = std::shared_ptr<spdlog::logger>;

// "trace", "debug", "info", "warn", "error" or "off" (PSTRAIN_LOG_LEVEL);
// nullopt for anything else.
std::optional<spdlog::level::level_enum> ParseLogLevel(const std::string& text);

// The level every logger made from now on starts at (default info). Set once
// at start-up, before any node starts.
void SetDefaultLogLevel(spdlog::level::level_enum level);

// A logger labelled `label` writing to stderr (the launch scripts redirect it
// to the node's log file), plus any extra sinks.
Logger MakeLogger(const std::string& label, std::vector<spdlog::sink_ptr> extra_sinks = {});

// The same, writing to `sinks` only (tests capture lines this way).
Logger MakeLoggerWithSinks(const std::string& label, std::vector<spdlog::sink_ptr> sinks);

// Relabels every line `log` and all its copies write from now on; safe while
// other threads log. A logger not made by the functions above is left as is.
void SetLogLabel(const Logger& log, const std::string& label);

}  // namespace pstrain
