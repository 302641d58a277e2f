// Helpers for the tests of the disk tier of embedding tables
// (row_store_test, tiered_table_test): temporary directories, small tmpfs
// mounts (a disk that fills up), Zipf-distributed ids, table options.
#pragma once

#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "embedding/table_options.h"
#include "src/common/random.h"
#include "src/common/status.h"
#include "tests/test_util.h"

namespace pstrain::testing {

// A tmpfs of `size` (mount(8) syntax, "1m") mounted on `dir` (created), read
// only if asked; unmounted when destroyed. Needs root (CAP_SYS_ADMIN).
class TmpfsMount {
 public:
  TmpfsMount(const std::string& dir, const std::string& size, bool read_only = false) : dir_(dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string data = "size=" + size;
    if (::mount("tmpfs", dir.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, data.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = std::strerror(errno);
    }
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// OK where a test can mount a small tmpfs (to fill a disk up); else why not.
inline Status CanMountTmpfs() {
  TempDir dir;
  TmpfsMount mount(dir / "m", "64k");
  if (mount.mounted()) return Status::OK();
  return FailedPrecondition("cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): " + mount.error());
}

// Zipf over ranks 0..n-1 (rank k with probability proportional to
// (k+1)^-s), by inverse CDF. Ids are the ranks scattered over 40 bits, so
// that neighbours in rank are not neighbours in id order.
class ZipfDraws {
 public:
  ZipfDraws(int64_t n, double s) : cdf_(static_cast<size_t>(n)) {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) cdf_[k] = sum += std::pow(static_cast<double>(k + 1), -s);
    for (double& c : cdf_) c /= sum;
  }
  static int64_t IdOfRank(int64_t rank) {
    return static_cast<int64_t>(Mix64(static_cast<uint64_t>(rank)) >> 24);
  }
  // `count` draws, a function of (seed, round) only: a test can replay any
  // round.
  std::vector<int64_t> Round(uint64_t seed, int64_t round, size_t count) const {
    Rng rng(StreamSeed(seed, static_cast<uint64_t>(round)));
    std::vector<int64_t> ids(count);
    for (int64_t& id : ids) {
      const double u = rng.Uniform();
      const auto rank = std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
      id = IdOfRank(std::min<int64_t>(rank, static_cast<int64_t>(cdf_.size()) - 1));
    }
    return ids;
  }
  int64_t ranks() const { return static_cast<int64_t>(cdf_.size()); }

 private:
  std::vector<double> cdf_;
};

inline EmbeddingTableOptions TierOptions(OptimizerType type, int dim = 8) {
  EmbeddingTableOptions o;
  o.name = "emb";
  o.dim = dim;
  o.seed = 42;
  o.init_scale = 0.1f;
  o.optimizer.type = type;
  o.optimizer.lr = 0.05f;
  return o;
}

}  // namespace pstrain::testing
