#include "roles/worker/compressed_pulls.h"

#include <fmt/format.h>

#include <algorithm>

namespace pstrain {

std::vector<bool> CompressedPulls(const Config& config, const std::vector<Param*>& params) {
  std::vector<bool> out;
  for (const Param* param : params) {
    const CompressionConfig compression = CompressionFor(config, param->name);
    out.push_back(compression.enabled() && compression.pull_density > 0);
  }
  return out;
}

Status PullWhole(KvClient* kv, const std::vector<Param*>& params,
                 const std::vector<bool>& compressed, int64_t min_clock) {
  std::vector<KvOp> ops;
  for (size_t t = 0; t < params.size(); ++t) {
    if (!compressed[t]) continue;
    ops.push_back({KvOp::Kind::kPull, static_cast<int>(t), params[t]->value.ptr(), min_clock});
    // Still a compressed pull, so that the next is one too: the servers
    // answer a pull that names no previous reply dense.
    ops.back().delta = true;
  }
  if (ops.empty()) return Status::OK();
  kv->ForgetDeltaPulls();
  return kv->Run(std::move(ops)).Wait().WithContext("whole pull of the compressed-pull weights");
}

std::string DescribeCompressedPulls(const KvClient& kv, int rank, int64_t steps) {
  const int64_t bytes = kv.compressed_pulls().bytes, dense = kv.compressed_pulls().dense_bytes;
  if (dense == 0 || steps <= 0) return "";
  return fmt::format(
      "worker {} pulled {:.0f} bytes/step of its compressed-pull weights ({:.0f} dense, {:.1f}x "
      "fewer)",
      rank, static_cast<double>(bytes) / steps, static_cast<double>(dense) / steps,
      static_cast<double>(dense) / std::max<int64_t>(bytes, 1));
}

}  // namespace pstrain
