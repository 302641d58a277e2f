// Helpers shared by the config test suites.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "src/common/config/config.h"

namespace pstrain::testing {

inline Config Parse(const std::string& yaml) {
  auto config = ParseConfig(yaml, "x.yaml");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

inline std::string ErrorOf(const std::string& yaml) {
  auto config = ParseConfig(yaml, "x.yaml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == StatusCode::kInvalidArgument);
  return config.status().message();
}

// A file under the temp directory, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& text)
      : path_((std::filesystem::temp_directory_path() /
               ("pstrain_config_test_" + std::to_string(getpid()) + ".yaml"))
                  .string()) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pstrain::testing
