#include "src/data/gen_cli.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "src/common/config/options.h"
#include "src/data/criteo_gen.h"

namespace pstrain {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

void DeclareCriteo(CLI::App* app, GenOptions* options) {
  app->require_subcommand(1);
  CLI::App* criteo = app->add_subcommand(
      "criteo",
      "synthetic Criteo-format click data with a planted model; prints the best reachable AUC");
  criteo->add_option("--rows", options->rows, "training rows")
      ->required()
      ->check(CLI::PositiveNumber);
  criteo->add_option("--out", options->out_dir, "the directory to write")
      ->required()
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? "empty path" : ""; }, "DIR"));
  criteo->add_option("--shards", options->shards, "training files")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  criteo->add_option("--test-rows", options->test_rows, "test rows")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  criteo->add_option("--seed", options->seed, "random seed")->capture_default_str();
  criteo->add_option("--zipf", options->zipf, "Zipf exponent of the ids")->capture_default_str();
}

}  // namespace

int RunGen(const std::vector<std::string>& args) {
  GenOptions options;
  CLI::App app("Writes synthetic data sets.", "pstrain gen");
  DeclareCriteo(&app, &options);
  if (int status = ParseCommandLine(&app, args); status >= 0) return status;
  auto report = GenerateCriteo(options);
  if (!report.ok()) {
    const bool usage = report.status().code() == StatusCode::kInvalidArgument;
    std::fprintf(stderr, "pstrain gen: %s\n", report.status().message().c_str());
    return usage ? kExitUsage : kExitFailed;
  }
  // nlohmann-json escapes the directory, which may hold quotes or backslashes.
  nlohmann::ordered_json line = {
      {"gen", "criteo"},          {"rows", report->train_rows},
      {"shards", options.shards}, {"test_rows", report->test_rows},
      {"out", options.out_dir},   {"planted_auc", std::round(report->planted_auc * 1e4) / 1e4}};
  std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace pstrain
