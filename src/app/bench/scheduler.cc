// bench scheduler: a real scheduler (this executable with MS_ROLE=MS_SCHED)
// in its own process, against N simulated nodes (sim_nodes.h) in this one,
// each with its own connection. Per case it prints how long registration
// took, how long until every node had its topology, the Topology bytes all
// nodes received, the rate at which the scheduler handled heartbeats, and
// the scheduler's CPU time and memory (from /proc, and wait4 at its exit).
//
// The limits a case of N nodes meets on one machine: N descriptors in each
// process (the open-file limit is raised where it is lower, the hard one
// too when this process may, as root may up to fs.nr_open), N ephemeral
// ports of 127.0.0.1 (about 28,000 by Linux's default range), and the
// scheduler's memory (capped with RLIMIT_DATA, so that a scheduler that
// needs gigabytes fails the case instead of the machine).
#include "src/app/bench/scheduler.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include "src/app/bench/clock.h"
#include "src/app/bench/json.h"
#include "src/app/bench/proc_stats.h"
#include "src/app/bench/sim_nodes.h"

extern char** environ;

namespace pstrain {
namespace {

constexpr int64_t kSpareFiles = 256;  // logs, loops, the listener: beside one per node

// The soft limit at least `need` (the hard one too, where this process may
// raise it). Returns the soft limit now.
StatusOr<int64_t> EnsureOpenFiles(int64_t need) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return Internal("getrlimit(RLIMIT_NOFILE) failed");
  if (lim.rlim_cur != RLIM_INFINITY && static_cast<int64_t>(lim.rlim_cur) < need) {
    rlimit raised = lim;
    raised.rlim_cur = static_cast<rlim_t>(need);
    if (lim.rlim_max != RLIM_INFINITY && static_cast<int64_t>(lim.rlim_max) < need)
      raised.rlim_max = static_cast<rlim_t>(need);
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
      return FailedPrecondition(fmt::format(
          "a case of this size needs about {} open files per process, and the limit is {} (hard "
          "{}); raising the hard limit needs root, and at most fs.nr_open",
          need, lim.rlim_cur, lim.rlim_max));
    std::fprintf(stderr, "bench scheduler: open-file limit raised from %lld (hard %lld) to %lld\n",
                 static_cast<long long>(lim.rlim_cur), static_cast<long long>(lim.rlim_max),
                 static_cast<long long>(need));
    lim = raised;
  }
  return lim.rlim_cur == RLIM_INFINITY ? int64_t{-1} : static_cast<int64_t>(lim.rlim_cur);
}

StatusOr<uint16_t> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Internal("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return Internal("no free port on 127.0.0.1");
  return ntohs(addr.sin_port);
}

// The scheduler process, killed with the case unless it ended by itself.
class SchedulerProcess {
 public:
  ~SchedulerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Status Spawn(const std::string& bin, uint16_t port, int servers, int workers, double timeout_s,
               int64_t memory_mb) {
    const char* tmp = std::getenv("TMPDIR");
    log_path_ = fmt::format("{}/pstrain-bench-scheduler-{}-{}.log", tmp && *tmp ? tmp : "/tmp",
                            getpid(), servers + workers);
    // This environment without the job's variables, then the scheduler's.
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      if (kv.rfind("MS_", 0) != 0 && kv.rfind("PSTRAIN_", 0) != 0) env.push_back(kv);
    }
    for (std::string kv :
         {std::string("MS_ROLE=MS_SCHED"), fmt::format("MS_SERVER_NUM={}", servers),
          fmt::format("MS_WORKER_NUM={}", workers), std::string("MS_SCHED_HOST=127.0.0.1"),
          fmt::format("MS_SCHED_PORT={}", port),
          fmt::format("PSTRAIN_REGISTER_TIMEOUT={}", timeout_s)})
      env.push_back(kv);
    std::vector<char*> envp;
    for (std::string& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    char arg0[] = "pstrain";
    char* argv[] = {arg0, nullptr};
    const std::string exe = bin.empty() ? "/proc/self/exe" : bin;
    const rlimit data{static_cast<rlim_t>(memory_mb) << 20, static_cast<rlim_t>(memory_mb) << 20};
    const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return Internal("cannot write " + log_path_);
    pid_ = fork();
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      setrlimit(RLIMIT_DATA, &data);
      dup2(log_fd, 1);
      dup2(log_fd, 2);
      execve(exe.c_str(), argv, envp.data());
      _exit(127);
    }
    close(log_fd);
    if (pid_ < 0) return Internal("fork failed");
    return Status::OK();
  }

  // Until the scheduler logs that it listens.
  Status WaitListening(double timeout_s) {
    const auto start = BenchClock::now();
    while (SecondsSince(start) < timeout_s) {
      std::ifstream log(log_path_);
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      if (text.find("The scheduler listens on") != std::string::npos) return Status::OK();
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return Unavailable("the scheduler exited at start: " + Failure());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return DeadlineExceeded(fmt::format("the scheduler did not listen within {} s", timeout_s));
  }

  // Its exit, with its CPU time and peak RSS.
  StatusOr<rusage> WaitExit(double timeout_s) {
    const auto start = BenchClock::now();
    while (SecondsSince(start) < timeout_s) {
      int status = 0;
      rusage usage{};
      if (wait4(pid_, &status, WNOHANG, &usage) == pid_) {
        pid_ = -1;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return usage;
        return Aborted(fmt::format("the scheduler ended with {} {}",
                                   WIFEXITED(status) ? "status" : "signal",
                                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return DeadlineExceeded(fmt::format("the scheduler did not exit within {} s", timeout_s));
  }

  std::string Failure() const { return fmt::format("its log is {}", log_path_); }
  void RemoveLog() const { std::remove(log_path_.c_str()); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

StatusOr<Json> RunCase(const SchedulerBenchOptions& o, int nodes) {
  const int servers = std::max(1, std::min(nodes - 1, nodes / o.servers_every));
  const int workers = nodes - servers;
  auto open_files = EnsureOpenFiles(nodes + kSpareFiles);
  if (!open_files.ok()) return open_files.status();
  auto port = FreePort();
  if (!port.ok()) return port.status();
  SchedulerProcess scheduler;
  PSTRAIN_RETURN_IF_ERROR(
      scheduler.Spawn(o.scheduler_bin, *port, servers, workers, o.timeout_s, o.memory_mb));
  auto fail = [&](const Status& why) {
    return why.WithContext(fmt::format("{} nodes ({})", nodes, scheduler.Failure()));
  };
  if (Status st = scheduler.WaitListening(o.timeout_s); !st.ok()) return fail(st);

  SimShape shape;
  shape.port = *port;
  shape.servers = servers;
  shape.workers = workers;
  shape.loops = o.loops;
  shape.window = o.window;
  shape.heartbeats = o.heartbeats;
  shape.recovery_wait_s = o.recover ? o.timeout_s : 0;
  shape.limits.server_num = servers;
  shape.limits.worker_num = workers;
  SimNodes sim(shape);
  if (Status st = sim.Start(); !st.ok()) return fail(st);
  auto joined = sim.Join(o.timeout_s);
  if (!joined.ok()) return fail(joined.status());
  auto at_topology = ReadProcStats(scheduler.pid());
  auto beat = sim.Beat(o.timeout_s);
  if (!beat.ok()) return fail(beat.status());
  auto after_beat = ReadProcStats(scheduler.pid());
  if (!at_topology.ok() || !after_beat.ok())
    return fail(Internal("cannot read the scheduler's /proc"));
  std::optional<RecoveryFigures> recovered;
  if (o.recover) {
    auto r = sim.Recover(o.timeout_s);
    if (!r.ok()) return fail(r.status());
    recovered = *r;
  }
  auto finished = sim.Finish(o.timeout_s);
  if (!finished.ok()) return fail(finished.status());
  auto usage = scheduler.WaitExit(o.timeout_s);
  if (!usage.ok()) return fail(usage.status());
  scheduler.RemoveLog();

  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  const int64_t heartbeats = int64_t{nodes} * o.heartbeats;
  Json line = {
      {"bench", "scheduler"},
      {"nodes", nodes},
      {"servers", servers},
      {"workers", workers},
      {"loops", o.loops},
      {"register_s", Rounded(joined->registered_s, 3)},
      {"topology_s", Rounded(joined->topology_s, 3)},
      {"topology_bytes", joined->topology_bytes},
      {"topology_max_entries", joined->topology_max_entries},
      {"heartbeats", heartbeats},
      {"heartbeats_per_s", Rounded(static_cast<double>(heartbeats) / *beat, 0)},
      {"shutdown_s", Rounded(*finished, 3)},
      {"sched_cpu_s", Rounded(seconds(usage->ru_utime) + seconds(usage->ru_stime), 2)},
      {"sched_cpu_to_topology_s", Rounded(at_topology->cpu_s, 2)},
      {"sched_rss_mb", Rounded(after_beat->rss_mb, 1)},
      {"sched_rss_without_cuda_mb", Rounded(after_beat->rss_mb - after_beat->cuda_rss_mb, 1)},
      {"sched_peak_rss_mb", Rounded(usage->ru_maxrss / 1024.0, 1)},
      {"connect_retries", joined->connect_retries},
      {"open_files", *open_files}};
  if (recovered) {
    line["recovery_topology_s"] = Rounded(recovered->topology_s, 3);
    line["recovery_topology_bytes"] = recovered->topology_bytes;
    line["recovery_topology_entries"] = recovered->topology_entries;
    line["recovery_topology_max_entries"] = recovered->topology_max_entries;
  }
  if (!o.scheduler_bin.empty()) line["scheduler_bin"] = o.scheduler_bin;
  return line;
}

}  // namespace

Status RunSchedulerBench(const SchedulerBenchOptions& options) {
  for (int nodes : options.nodes) {
    auto line = RunCase(options, nodes);
    if (!line.ok()) return line.status();
    PrintJsonLine(*line);
  }
  return Status::OK();
}

}  // namespace pstrain
