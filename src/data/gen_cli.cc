#include "src/data/gen_cli.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "src/common/config/options.h"
#include "src/data/criteo_gen.h"
#include "src/data/libsvm_gen.h"

namespace pstrain {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// The options every data set has: its size, files and seed.
CLI::App* DeclareShape(CLI::App* app, const char* name, const char* what, GenShape* shape) {
  CLI::App* sub = app->add_subcommand(name, what);
  sub->add_option("--rows", shape->rows, "training rows")->required()->check(CLI::PositiveNumber);
  sub->add_option("--out", shape->out_dir, "the directory to write")
      ->required()
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? "empty path" : ""; }, "DIR"));
  sub->add_option("--shards", shape->shards, "training files")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--test-rows", shape->test_rows, "test rows")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", shape->seed, "random seed")->capture_default_str();
  return sub;
}

}  // namespace

int RunGen(const std::vector<std::string>& args) {
  GenOptions criteo_options;
  LibsvmGenOptions libsvm_options;
  CLI::App app("Writes synthetic data sets.", "pstrain gen");
  app.require_subcommand(1);
  CLI::App* criteo = DeclareShape(
      &app, "criteo",
      "synthetic Criteo-format click data with a planted model; prints the best reachable AUC",
      &criteo_options);
  criteo->add_option("--zipf", criteo_options.zipf, "Zipf exponent of the ids")
      ->capture_default_str();
  CLI::App* libsvm = DeclareShape(
      &app, "libsvm",
      "synthetic sparse click data in libsvm format (label id:value ...) with a planted "
      "logistic model; prints the best reachable AUC",
      &libsvm_options);
  libsvm->add_option("--features", libsvm_options.features, "distinct ids (1..N; 0 is the bias)")
      ->capture_default_str();
  libsvm->add_option("--zipf", libsvm_options.zipf, "Zipf exponent of the ids")
      ->capture_default_str();
  if (int status = ParseCommandLine(&app, args); status >= 0) return status;
  const bool is_libsvm = libsvm->parsed();
  const GenShape& options = is_libsvm ? static_cast<const GenShape&>(libsvm_options)
                                      : static_cast<const GenShape&>(criteo_options);
  auto report = is_libsvm ? GenerateLibsvm(libsvm_options) : GenerateCriteo(criteo_options);
  if (!report.ok()) {
    const bool usage = report.status().code() == StatusCode::kInvalidArgument;
    std::fprintf(stderr, "pstrain gen: %s\n", report.status().message().c_str());
    return usage ? kExitUsage : kExitFailed;
  }
  // nlohmann-json escapes the directory, which may hold quotes or backslashes.
  nlohmann::ordered_json line = {{"gen", is_libsvm ? "libsvm" : "criteo"},
                                 {"rows", report->train_rows},
                                 {"shards", options.shards},
                                 {"test_rows", report->test_rows},
                                 {"out", options.out_dir},
                                 {"planted_auc", std::round(report->planted_auc * 1e4) / 1e4}};
  std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace pstrain
