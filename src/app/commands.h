// The subcommands around training: each takes its parsed options (the
// command-line layer in main.cc fills them) and returns the process's exit
// status: 0 done, 1 failed, 2 bad arguments or config (one line on stderr).
#pragma once

#include <string>
#include <vector>

#include "src/common/config/options.h"

namespace pstrain {

// pstrain export --checkpoint DIR --out FILE: every dense weight (name and
// full shape) and every server-held table (ids and rows) of a checkpoint, in
// a file Python reads with numpy alone.
struct ExportOptions {
  std::string checkpoint_dir;
  std::string out_path;
};
int RunExport(const ExportOptions& options);

// pstrain eval --config F --checkpoint DIR: the test metric of the model a
// checkpoint holds, without training.
struct EvalOptions {
  std::string config_path;
  ConfigOverrides config_overrides;  // --set
  std::string checkpoint_dir;
};
int RunEval(const EvalOptions& options);

// pstrain check --config F: parses the config and opens every data file it
// names; exit 0, or one error line and exit 2.
struct CheckOptions {
  std::string config_path;
  ConfigOverrides config_overrides;  // --set, --resume
};
int RunCheck(const CheckOptions& options);

// pstrain plot METRICS.jsonl... --out FILE.svg: loss, test metric and
// throughput against steps and wall time, one curve per node.
struct PlotOptions {
  std::vector<std::string> metrics_paths;
  std::string out_path;
};
int RunPlot(const PlotOptions& options);

// pstrain scale --workers N --servers M: asks a running elastic job's
// scheduler (MS_SCHED_HOST, MS_SCHED_PORT, MS_CLUSTER_TOKEN) for a shape;
// prints its answer. 1 when refused or not reached.
int RunScale(const ScaleOptions& options);

}  // namespace pstrain
