// bench allreduce: the CPU ring all-reduce of one float tensor among
// `world` ranks, each a separate process (as Gloo's reference is), over
// shared memory (ShmRingCollective, the default: what workers of one host
// use) or TCP (RingCollective), on 127.0.0.1 or, with network namespaces
// named (--netns), each rank on a host of its own: rank r enters namespace r
// right after the fork, before it opens a socket, and listens on its
// address there. Rank 0 reports the median time per all-reduce, the
// algorithm bandwidth (bytes / time), the bus bandwidth (2(n-1)/n x
// bytes / time) and the CPU time its process spent per all-reduce (what an
// all-reduce costs whatever else the machine runs).
//
// Setup, per case, through a pair of pipes between the parent and each rank:
//   1. rank r sets up its receiving end and writes its address (shm: channel
//      name and nonce; tcp: host and port) to the parent;
//   2. the parent hands rank r the address of rank r+1; r connects and
//      writes "ready";
//   3. once all are ready the parent writes "go" to each; they run, and
//      each writes its median seconds and CPU seconds per all-reduce;
//   4. once all have, the parent writes "bye" and they exit (a rank that
//      closed its end earlier would fail a neighbour still finishing).
// A rank that fails exits non-zero, which fails its neighbours' calls in
// turn; the parent then ends the rest (nothing hangs).
#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective/ring_collective.h"
#include "comm/collective/shm_ring.h"
#include "comm/transport/listener.h"
#include "src/app/bench/json.h"
#include "src/common/logging.h"
#include "src/common/network_mask.h"
#include "src/common/tensor.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

// User and system CPU seconds of this process so far, all its threads.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// What rank 0 measured: median seconds and CPU seconds per all-reduce.
struct Timing {
  double seconds = 0, cpu_seconds = 0;
};

// About 2 GiB through rank 0 per case, within [20, 2000] all-reduces.
int AllReduceIters(int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>((int64_t{1} << 31) / (2 * bytes), 20, 2000));
}

Status WriteLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  for (size_t at = 0; at < text.size();) {
    const ssize_t n = write(fd, text.data() + at, text.size() - at);
    if (n <= 0) return Unavailable("bench: a pipe to a rank closed");
    at += static_cast<size_t>(n);
  }
  return Status::OK();
}

StatusOr<std::string> ReadLine(int fd) {
  std::string line;
  char c = 0;
  while (line.size() < 4096) {
    if (read(fd, &c, 1) != 1) return Unavailable("bench: a rank exited early");
    if (c == '\n') return line;
    line += c;
  }
  return InvalidArgument("bench: a line too long from a rank");
}

// One rank's end of the ring, set up inside its own process.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // Step 1: the address rank r-1 connects to.
  virtual StatusOr<std::string> Listen() = 0;
  // Step 2.
  virtual Status Connect(const std::string& next) = 0;
  // Step 3, before the first operation.
  virtual void Start() {}
  virtual Collective& collective() = 0;
};

class ShmEndpoint : public Endpoint {
 public:
  ShmEndpoint(int rank, int world) : rank_(rank), world_(world) {}
  StatusOr<std::string> Listen() override {
    auto ring = ShmRingCollective::Create(rank_, world_);
    if (!ring.ok()) return ring.status();
    ring_ = std::move(*ring);
    return fmt::format("{} {}", ring_->inbound_name(), ring_->inbound_nonce());
  }
  Status Connect(const std::string& next) override {
    const size_t space = next.find(' ');
    if (space == std::string::npos) return InvalidArgument("bench: bad shm address " + next);
    return ring_->ConnectNext(next.substr(0, space),
                              std::strtoull(next.c_str() + space + 1, nullptr, 10));
  }
  void Start() override { ring_->InboundOpened(); }  // rank r-1 is connected by now
  Collective& collective() override { return *ring_; }

 private:
  const int rank_, world_;
  std::unique_ptr<ShmRingCollective> ring_;
};

// LocalRing's wiring for one rank of its own process, listening on `host`.
class TcpEndpoint : public Endpoint {
 public:
  TcpEndpoint(int rank, int world, std::string host)
      : rank_(rank), world_(world), host_(std::move(host)), log_(MakeLogger("ring")) {
    log_->set_level(spdlog::level::warn);
  }
  ~TcpEndpoint() override {
    const Status stopped = loop_.Stop();
    if (!stopped.ok()) log_->error("stopping rank {}: {}", rank_, stopped.message());
  }

  StatusOr<std::string> Listen() override {
    PSTRAIN_RETURN_IF_ERROR(loop_.Start());
    listener_ = std::make_unique<Listener>(&loop_, log_);
    auto port = loop_.Call<StatusOr<uint16_t>>(
        [this] {
          return listener_->Listen(host_, 0, [this](Connection::Ptr c) {
            c->SetRequestPlacer(
                [this](const Connection::Ptr& from, const Message& m, uint64_t size) {
                  auto* chunk = std::get_if<RingChunk>(&m.body);
                  if (chunk == nullptr || !ring_) return Buffer{};
                  return ring_->PlaceChunk(from, *chunk, size);
                });
            c->Start(
                [this](const Connection::Ptr&, Incoming&& in) {
                  if (auto* chunk = std::get_if<RingChunk>(&in.message.body))
                    ring_->OnChunk(*chunk, std::move(in.payload));
                },
                [this](const Connection::Ptr&, const Status& why) { Lost(why); });
          });
        },
        Aborted("the ring is stopping"));
    if (!port.ok()) return port.status();
    return fmt::format("{} {}", host_, *port);
  }
  Status Connect(const std::string& next) override {
    const size_t space = next.find(' ');
    if (space == std::string::npos) return InvalidArgument("bench: bad tcp address " + next);
    Completion<StatusOr<Connection::Ptr>> connected;
    loop_.Post([this, host = next.substr(0, space), port = std::atoi(next.c_str() + space + 1),
                connected] {
      Connection::Connect(&loop_, log_, host, static_cast<uint16_t>(port),
                          [connected](StatusOr<Connection::Ptr> c) { connected.Set(c); });
    });
    auto conn = connected.Wait();
    if (!conn.ok()) return conn.status();
    ring_ = std::make_unique<RingCollective>(&loop_, rank_, world_, *conn);
    loop_.Post([this, c = *conn] {
      c->Start(nullptr, [this](const Connection::Ptr&, const Status& why) { Lost(why); });
    });
    return Status::OK();
  }
  Collective& collective() override { return *ring_; }

 private:
  void Lost(const Status& why) {
    if (ring_) ring_->OnPeerLost(Unavailable("a neighbour is gone: " + why.message()));
  }
  const int rank_, world_;
  const std::string host_;
  Logger log_;
  EventLoop loop_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<RingCollective> ring_;
};

// Moves this process (single-threaded: just forked) into the network
// namespace `name` (as `ip netns add` made it); its address there: the first
// IPv4 address of an interface that is up, other than loopback.
StatusOr<std::string> EnterNetns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return FailedPrecondition(
        fmt::format("bench: no network namespace {}: {}", path, std::strerror(errno)));
  const int entered = setns(fd, CLONE_NEWNET);
  const int why = errno;
  close(fd);
  if (entered != 0)
    return FailedPrecondition(
        fmt::format("bench: cannot enter network namespace {}: {}", name, std::strerror(why)));
  for (const InterfaceAddress& a : LocalInterfaceAddresses())
    if (a.ip.find(':') == std::string::npos && a.ip.rfind("127.", 0) != 0) return a.ip;
  return FailedPrecondition(
      fmt::format("bench: network namespace {} has no IPv4 address but loopback", name));
}

// The body of rank r's process: steps 1-3, then the timed all-reduces.
// `netns`: the namespace the rank runs in (empty: this one, on 127.0.0.1).
Status RunRank(const std::string& transport, const std::string& netns, int rank, int world,
               int64_t bytes, int in, int out) {
  std::unique_ptr<Endpoint> end;
  if (transport == "shm") {
    end = std::make_unique<ShmEndpoint>(rank, world);
  } else {
    std::string host = "127.0.0.1";
    if (!netns.empty()) {
      auto address = EnterNetns(netns);
      if (!address.ok()) return address.status();
      host = *address;
    }
    end = std::make_unique<TcpEndpoint>(rank, world, host);
  }
  auto address = end->Listen();
  if (!address.ok()) return address.status();
  PSTRAIN_RETURN_IF_ERROR(WriteLine(out, *address));
  auto next = ReadLine(in);
  if (!next.ok()) return next.status();
  PSTRAIN_RETURN_IF_ERROR(end->Connect(*next));
  PSTRAIN_RETURN_IF_ERROR(WriteLine(out, "ready"));
  PSTRAIN_RETURN_IF_ERROR(ReadLine(in).status());
  end->Start();
  const int64_t n = bytes / 4;
  const int iters = AllReduceIters(bytes), warmup = 3;
  FloatBuffer data(static_cast<size_t>(n), 1.0f);  // tensor memory, as a model's
  std::vector<double> times;                       // seconds per timed all-reduce
  double cpu_start = 0;
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) cpu_start = ProcessCpuSeconds();
    Clock::time_point start = Clock::now();
    PSTRAIN_RETURN_IF_ERROR(end->collective().AllReduce(data.data(), n, ReduceOp::kSum));
    if (i >= warmup) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  const double cpu = (ProcessCpuSeconds() - cpu_start) / iters;
  PSTRAIN_RETURN_IF_ERROR(
      WriteLine(out, fmt::format("{:.9e} {:.9e}", times[times.size() / 2], cpu)));
  return ReadLine(in).status();  // step 4: "bye" once every rank is done
}

// Starts the ranks and runs the setup steps between them; what rank 0
// measured.
StatusOr<Timing> RunRanks(const std::string& transport, const std::vector<std::string>& netns,
                          int world, int64_t bytes) {
  std::vector<int> to(world, -1), from(world, -1);  // the parent's ends
  std::vector<pid_t> pids;
  // SIGPIPE is ignored from main() on: a rank that died fails a write instead.
  std::fflush(stdout);
  Status st;
  for (int r = 0; r < world && st.ok(); ++r) {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) {
      st = Internal("bench: pipe failed");
      break;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      for (int q = 0; q < r; ++q) close(to[q]), close(from[q]);
      close(down[1]);
      close(up[0]);
      Status done =
          RunRank(transport, netns.empty() ? "" : netns[r], r, world, bytes, down[0], up[1]);
      if (!done.ok())
        std::fprintf(stderr, "bench allreduce rank %d: %s\n", r, done.message().c_str());
      std::fflush(stderr);
      _exit(done.ok() ? 0 : 1);
    }
    close(down[0]);
    close(up[1]);
    to[r] = down[1];
    from[r] = up[0];
    if (pid < 0) st = Internal("bench: fork failed");
    if (pid > 0) pids.push_back(pid);
  }
  std::vector<std::string> addresses(world);
  for (int r = 0; r < world && st.ok(); ++r) {
    auto line = ReadLine(from[r]);
    st = line.status();
    if (line.ok()) addresses[r] = *line;
  }
  for (int r = 0; r < world && st.ok(); ++r) st = WriteLine(to[r], addresses[(r + 1) % world]);
  for (int r = 0; r < world && st.ok(); ++r) st = ReadLine(from[r]).status();
  for (int r = 0; r < world && st.ok(); ++r) st = WriteLine(to[r], "go");
  StatusOr<std::string> median = Unavailable("bench: no result");
  for (int r = 0; r < world && st.ok(); ++r) {
    auto line = ReadLine(from[r]);
    st = line.status();
    if (r == 0) median = line;
  }
  for (int r = 0; r < world && st.ok(); ++r) st = WriteLine(to[r], "bye");
  if (!st.ok())
    for (pid_t pid : pids) kill(pid, SIGKILL);  // a rank failed: the others may wait forever
  for (int r = 0; r < world; ++r) close(to[r]), close(from[r]);
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  PSTRAIN_RETURN_IF_ERROR(st);
  if (!median.ok() || failed > 0)
    return Unavailable(fmt::format("bench allreduce: {} of {} ranks failed", failed, world));
  char* end = nullptr;
  Timing timing;
  timing.seconds = std::strtod(median->c_str(), &end);
  timing.cpu_seconds = std::strtod(end, nullptr);
  return timing;
}

Status RunCase(const std::string& transport, const std::vector<std::string>& netns, int world,
               int64_t bytes) {
  auto timing = RunRanks(transport, netns, world, bytes);
  if (!timing.ok()) return timing.status();
  const double algbw = static_cast<double>(bytes) / timing->seconds / 1e9;
  const double busbw = algbw * 2.0 * (world - 1) / world;
  Json line = {{"bench", "allreduce"},
               {"backend", "cpu_ring_" + transport},
               {"bytes", bytes},
               {"world", world}};
  if (!netns.empty()) line["hosts"] = world;  // one namespace per rank
  line["iters"] = AllReduceIters(bytes);
  line["ms"] = Rounded(timing->seconds * 1e3, 4);
  line["algbw_GBps"] = Rounded(algbw, 3);
  line["busbw_GBps"] = Rounded(busbw, 3);
  line["cpu_ms"] = Rounded(timing->cpu_seconds * 1e3, 4);
  PrintJsonLine(line);
  return Status::OK();
}

}  // namespace

Status RunAllReduceBench(const std::vector<int64_t>& sizes, const std::vector<int>& worlds,
                         const std::string& transport, const std::vector<std::string>& netns) {
  if (transport != "shm" && transport != "tcp")
    return InvalidArgument("bench allreduce: --transport is tcp or shm, not " + transport);
  if (!netns.empty() && transport != "tcp") return InvalidArgument("--netns needs --transport tcp");
  for (int world : worlds)
    if (!netns.empty() && static_cast<size_t>(world) > netns.size())
      return InvalidArgument(fmt::format("--netns names {} namespaces, world {} needs one per rank",
                                         netns.size(), world));
  for (int64_t bytes : sizes)
    for (int world : worlds) PSTRAIN_RETURN_IF_ERROR(RunCase(transport, netns, world, bytes));
  return Status::OK();
}

}  // namespace pstrain
