// ExportCheckpoint (pstrain export) of a table with rows on disk runs in
// bounded memory: a checkpoint whose table has 2^21 rows of dim
// 16 with Adagrad (about 330 MB in the store checkpoint, 4096 rows in
// memory) is written here with the server's own pieces (TieredTable,
// RowStore, shard file), then exported in a child process, whose peak
// resident memory (VmHWM) may exceed its resident memory before the export
// (VmRSS) by only a fraction of what the rows on disk take.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "roles/checkpoint/store.h"
#include "roles/offline/export.h"
#include "src/common/checkpoint_file.h"
#include "tests/tiered_checkpoint_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kDim = 16;
constexpr int64_t kBudget = 4096;

// Waits at most `seconds` for child `pid`; its exit status (-1 when killed
// by a signal) and resource usage.
int WaitChild(pid_t pid, int seconds, struct rusage* usage) {
  int wstatus = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (::wait4(pid, &wstatus, WNOHANG, usage) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &wstatus, 0, usage);
      FAIL("a child process ran past " << seconds << " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a child has no event to wait on
  }
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
}

// Runs fn in a child process, so that the memory it takes (RocksDB's
// buffers, the table) never counts in this process's peak: a process
// started later by posix_spawn reports its parent's peak as part of its own.
void InChild(const std::function<void()>& fn) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      fn();
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  struct rusage usage {};
  REQUIRE(WaitChild(pid, 240, &usage) == 0);
}

int64_t BytesIn(const std::string& dir) {
  int64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) bytes += static_cast<int64_t>(entry.file_size());
  return bytes;
}

// A "Vm...:" line of /proc/self/status, in bytes.
int64_t ProcStatus(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  return -1;
}

// Exports `dir` to `out` in a child process (whose peak starts at its size
// when forked); returns the child's peak resident memory minus its resident
// memory before the export, or -1 when the export failed.
int64_t ExportGrowth(const std::string& dir, const std::string& out, std::string* said) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const int64_t before = ProcStatus("VmRSS");
    auto done = ExportCheckpoint(dir, out);
    const int64_t peak = ProcStatus("VmHWM");
    const std::string report =
        done.ok() ? std::to_string(peak - before) + " " + std::to_string(done->table_rows)
                  : "error " + done.status().message();
    (void)!::write(fds[1], report.data(), report.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  struct rusage usage {};
  const int status = WaitChild(pid, 240, &usage);
  char buffer[4096];
  const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
  ::close(fds[0]);
  REQUIRE(status == 0);
  *said = std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0);
  if (said->rfind("error", 0) == 0) return -1;
  return std::stoll(*said);
}

TEST_CASE("a table far larger than export's memory growth exports whole") {
  TempDir dir;
  REQUIRE_FALSE(dir.path().empty());
  constexpr int64_t kRows = int64_t{1} << 21;
  // The table is built in a child, so that RocksDB's memory and threads stay
  // out of this process (forked again below).
  InChild([&] { testing::WriteTieredCheckpoint(dir / "big", {1, kRows, kBudget, kDim}); });
  const int64_t on_disk =
      BytesIn(CheckpointStepDir(dir / "big", 1) + "/" + StoreCheckpointDirName(0));
  std::string said;
  const int64_t growth = ExportGrowth(dir / "big", dir / "big.npz", &said);
  MESSAGE("store checkpoint " << on_disk / 1000000 << " MB; export's peak resident memory grew "
                              << growth / 1000000 << " MB (" << growth << " bytes)");
  REQUIRE_MESSAGE(growth >= 0, said);
  CHECK(said == std::to_string(growth) + " " + std::to_string(kRows));  // every row
  // ids (8 bytes) and values (kDim floats), plus headers.
  CHECK(static_cast<int64_t>(fs::file_size(dir / "big.npz")) >= kRows * (8 + kDim * 4));
  CHECK(on_disk > kRows * kDim * 8);  // values and Adagrad's slot
  // Holding every row's id and values alone would take 151 MB (on_disk /
  // 2.2); a generous bound under that (measured: 40 to 65 MB, mostly
  // RocksDB's read-ahead per file and its code, the same for any size).
  CHECK(growth < on_disk / 3);
}

}  // namespace
}  // namespace pstrain
