// A scratch directory for the benches that need a disk (bench_tiered.cc,
// bench_store.cc): made under --store-dir (default $TMPDIR, else /tmp),
// removed with everything in it at the end.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "src/common/status.h"

namespace pstrain {

class ScratchDir {
 public:
  // A fresh directory under `parent` ("": $TMPDIR, else /tmp).
  static StatusOr<ScratchDir> Create(std::string parent) {
    if (parent.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string pattern = parent + "/pstrain-bench-store-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      return FailedPrecondition("--store-dir " + parent +
                                ": cannot create a directory in it: " + std::strerror(errno));
    return ScratchDir(pattern);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace pstrain
