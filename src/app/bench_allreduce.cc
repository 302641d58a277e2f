// bench allreduce: the CPU ring all-reduce of one float tensor among
// `world` ranks (threads of this process, each with its own event loop,
// over 127.0.0.1): median time per all-reduce, algorithm bandwidth
// (bytes / time) and bus bandwidth (2(n-1)/n x bytes / time).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "comm/local_ring.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

// About 2 GiB through rank 0 per case, within [20, 2000] all-reduces.
int AllReduceIters(int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>((int64_t{1} << 31) / (2 * bytes), 20, 2000));
}

Status RunCase(int world, int64_t bytes) {
  auto ring = LocalRing::Create(world);
  if (!ring.ok()) return ring.status();
  const int64_t n = bytes / 4;
  const int iters = AllReduceIters(bytes), warmup = 3;
  std::vector<std::vector<float>> data(world, std::vector<float>(n, 1.0f));
  std::vector<double> rank0;  // seconds per timed all-reduce on rank 0
  std::vector<Status> results(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < warmup + iters; ++i) {
        Clock::time_point start = Clock::now();
        Status st = (*ring)->rank(r).AllReduce(data[r].data(), n, ReduceOp::kSum);
        if (!st.ok()) {
          results[r] = st;
          return;
        }
        if (r == 0 && i >= warmup)
          rank0.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) PSTRAIN_RETURN_IF_ERROR(st);
  std::nth_element(rank0.begin(), rank0.begin() + rank0.size() / 2, rank0.end());
  const double median = rank0[rank0.size() / 2];
  const double algbw = static_cast<double>(bytes) / median / 1e9;
  const double busbw = algbw * 2.0 * (world - 1) / world;
  std::printf(
      "{\"bench\":\"allreduce\",\"backend\":\"cpu_ring\",\"bytes\":%lld,\"world\":%d,"
      "\"iters\":%d,\"ms\":%.4f,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
      static_cast<long long>(bytes), world, iters, median * 1e3, algbw, busbw);
  std::fflush(stdout);
  return Status::OK();
}

}  // namespace

Status RunAllReduceBench(const std::vector<int64_t>& sizes, const std::vector<int>& worlds) {
  for (int64_t bytes : sizes)
    for (int world : worlds) PSTRAIN_RETURN_IF_ERROR(RunCase(world, bytes));
  return Status::OK();
}

}  // namespace pstrain
