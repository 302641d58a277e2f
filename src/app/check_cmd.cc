// pstrain check --config F: the config parses, and every data file it names
// (train and test, every shard) opens and reads as its format, before a job
// is started on a cluster. Reading the files whole is what catches a file of
// the wrong format or a truncated one; it costs what the job's start does.
#include <fmt/format.h>

#include <cstdio>

#include "src/app/commands.h"
#include "src/common/config.h"
#include "src/data/dataset.h"

namespace pstrain {

int RunCheck(const CheckOptions& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "pstrain check: %s\n", message.c_str());
    return 2;
  };
  auto config = LoadConfig(options.config_path);  // its errors start with the path
  if (!config.ok()) return fail(config.status().message());
  // Data errors name the data file; the config that named it goes first.
  auto data_fail = [&](const Status& st) {
    return fail(fmt::format("{}: {}", options.config_path, st.message()));
  };
  int64_t train = 0, test = 0;
  if (config->has_data) {
    // Rank 0 of 1: every training file, shards included.
    auto data = LoadTrainShard(config->data, 0, 1);
    if (!data.ok()) return data_fail(data.status());
    train = data->size();
    if (!config->data.test.empty()) {
      auto held_out = LoadTest(config->data);
      if (!held_out.ok()) return data_fail(held_out.status());
      test = held_out->size();
    }
  }
  std::printf("%s\n", fmt::format("{}: OK: {} training and {} test samples{}", options.config_path,
                                  train, test, config->has_data ? "" : " (no data: section)")
                          .c_str());
  return 0;
}

}  // namespace pstrain
