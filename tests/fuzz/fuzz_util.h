// Helpers shared by the harnesses: a scratch file per process for readers
// that take a path, and a stop that libFuzzer reports as a crash with the
// input saved (a broken invariant is a finding like a sanitizer report).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace pstrain::fuzz {

// Reports a broken invariant and aborts: libFuzzer saves the input.
[[noreturn]] inline void Fail(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "FUZZ INVARIANT BROKEN: %s %s\n", what, detail.c_str());
  std::abort();
}

// "<dir>/pstrain-fuzz-<pid>-<tag>": one path per process and use, so that
// harnesses run side by side (ctest -j) never share a file. The directory is
// $TMPDIR, else /dev/shm where it exists (in memory: opening and closing a
// file on disk each run cost most of a run), else /tmp.
inline std::string ScratchPath(const char* tag) {
  const char* env = std::getenv("TMPDIR");
  std::string dir = env != nullptr && *env != '\0'  ? env
                    : access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                                                    : "/tmp";
  return dir + "/pstrain-fuzz-" + std::to_string(getpid()) + "-" + tag;
}

// Writes `size` bytes to `path` (replacing it); aborts if it cannot, since
// the harness would then test nothing.
inline void WriteScratch(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
    Fail("cannot write scratch file", path);
}

// Removes the scratch files at exit (libFuzzer ends by exit()).
class ScratchFiles {
 public:
  void Add(const std::string& path) { paths_.push_back(path); }
  ~ScratchFiles() {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }

 private:
  std::vector<std::string> paths_;
};

}  // namespace pstrain::fuzz
