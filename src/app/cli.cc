#include "src/app/cli.h"

#include <build_info.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "src/app/commands.h"
#include "src/common/config/options.h"

namespace pstrain {
namespace {

// A path flag: required, not empty.
CLI::Option* AddPath(CLI::App* app, const std::string& flag, std::string* out,
                     const std::string& what) {
  return app->add_option(flag, *out, what)
      ->required()
      ->check(
          CLI::Validator([](std::string& s) { return s.empty() ? "an empty path" : ""; }, "PATH"));
}

// --set KEY=VALUE, repeatable, as a job's (src/common/config/overrides.h).
void AddConfigSets(CLI::App* app, std::vector<std::string>* sets) {
  app->add_option("--set", *sets, "change a key of the config, as a job's --set does (repeatable)")
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace

int RunExportCli(const std::vector<std::string>& args) {
  ExportOptions options;
  CLI::App app(
      "Writes every dense weight (name and full shape) and every server-held table (ids and "
      "rows) of a checkpoint to a file Python reads with numpy alone.",
      "pstrain export");
  AddPath(&app, "--checkpoint", &options.checkpoint_dir,
          "the checkpoint directory (its newest step), or one step's directory in it");
  AddPath(&app, "--out", &options.out_path, "the file to write");
  if (int status = ParseCommandLine(&app, args); status >= 0) return status;
  return RunExport(options);
}

int RunEvalCli(const std::vector<std::string>& args) {
  EvalOptions options;
  CLI::App app("Prints the test metric of the model a checkpoint holds, without training.",
               "pstrain eval");
  AddPath(&app, "--config", &options.config_path, "the job's YAML config (model and test data)");
  AddPath(&app, "--checkpoint", &options.checkpoint_dir,
          "the checkpoint directory (its newest step), or one step's directory in it");
  AddConfigSets(&app, &options.config_overrides.sets);
  if (int status = ParseCommandLine(&app, args); status >= 0) return status;
  return RunEval(options);
}

int RunCheckCli(const std::vector<std::string>& args) {
  CheckOptions options;
  CLI::App app(
      "Builds a config's model as training does, reads every data file it names and checks "
      "their first batches against the model, checks that train.checkpoint.dir and "
      "PSTRAIN_LOG_DIR are writable, and prints a summary (layer shapes, parameters, where each "
      "lives): exit 0, or one error line and exit 2.",
      "pstrain check");
  AddPath(&app, "--config", &options.config_path, "the job's YAML config");
  AddConfigSets(&app, &options.config_overrides.sets);
  app.add_flag("--resume", options.config_overrides.resume, "as a job's --resume")
      ->disable_flag_override();
  if (int status = ParseCommandLine(&app, args); status >= 0) return status;
  return RunCheck(options);
}

int RunScaleCli(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      std::fputs(ScaleOptionsHelp().c_str(), stdout);
      return 0;
    }
  auto options = ParseScaleOptions(args, ProcessEnv());
  if (!options.ok()) {
    std::fprintf(stderr, "pstrain scale: %s\n", options.status().message().c_str());
    return 2;
  }
  return RunScale(*options);
}

int RunPlotCli(const std::vector<std::string>& args) {
  PlotOptions options;
  CLI::App app(
      "Plots loss, test metric and throughput against steps and wall time, one curve per node, "
      "as a self-contained SVG.",
      "pstrain plot");
  app.add_option("METRICS", options.metrics_paths, "metrics-<role>-<rank>.jsonl files")
      ->required()
      ->type_name("METRICS...");
  AddPath(&app, "--out", &options.out_path, "the SVG file to write");
  if (int status = ParseCommandLine(&app, args); status >= 0) return status;
  return RunPlot(options);
}

std::string VersionLine() {
  return std::string("pstrain ") + PSTRAIN_VERSION + " (CUDA: " + PSTRAIN_BUILD_CUDA +
         ", NCCL: " + PSTRAIN_BUILD_NCCL + ", native: " + PSTRAIN_BUILD_NATIVE + ", " +
         PSTRAIN_BUILD_TYPE + ")";
}

}  // namespace pstrain
