#include "src/app/launcher/supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

extern char** environ;

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSshFailed = 255;          // ssh's own exit status for its errors
constexpr size_t kMaxLineBytes = 65536;  // a longer line is passed on in pieces
constexpr int kPollMs = 200;

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  char c = static_cast<char>(sig);
  // Nothing to do if the pipe is full: a signal is already waiting in it.
  ssize_t ignored = write(g_signal_pipe[1], &c, 1);
  (void)ignored;
}

// One of a node's output pipes, cut into lines.
struct Stream {
  int fd = -1;
  FILE* to = nullptr;
  std::string partial;
};

struct Child {
  LaunchNode node;
  std::string prefix;  // "[host server 0] "
  pid_t pid = -1;
  int stdin_fd = -1;   // the lifeline; closed to stop the node
  std::string unsent;  // the job payload not yet written to stdin
  Stream out, err;
  std::string last_err;  // its last stderr line, for the launcher's message
  bool exited = false;
  int status = 0;  // exit status, or 128+N for a signal N
};

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

void EmitLine(Child& child, Stream& s, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  fmt::print(s.to, "{}{}\n", child.prefix, line);
  std::fflush(s.to);
  if (&s == &child.err && !line.empty()) child.last_err = std::string(line);
}

// Reads what is there; at end of stream the unfinished line goes out too.
void Drain(Child& child, Stream& s) {
  char buf[16384];
  ssize_t n = read(s.fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (!s.partial.empty()) EmitLine(child, s, s.partial);
    s.partial.clear();
    CloseFd(s.fd);
    return;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1)
    EmitLine(child, s, std::string_view(s.partial).substr(start, nl - start));
  s.partial.erase(0, start);
  if (s.partial.size() > kMaxLineBytes) {
    EmitLine(child, s, s.partial);
    s.partial.clear();
  }
}

std::string Prefix(const LaunchNode& node) {
  if (node.role == Role::kScheduler) return fmt::format("[{} scheduler] ", node.host);
  return fmt::format("[{} {} {}] ", node.host, RoleName(node.role), node.rank);
}

Status Spawn(const LaunchJob& job, Child& child) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", std::strerror(errno)));
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return Internal(fmt::format("pipe: {}", std::strerror(errno)));
  }
  std::vector<std::string> args = job.ssh;
  args.push_back(child.node.host);
  args.push_back(RemoteCommand(job.bin, job.grace_s));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A process group of its own: the terminal's Ctrl-C reaches the launcher
  // alone, which stops the job in order instead of losing every ssh at once.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  int rc = posix_spawnp(&child.pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    return Unavailable(fmt::format("cannot run {}: {}", args[0], std::strerror(rc)));
  }
  child.stdin_fd = in[1];
  fcntl(child.stdin_fd, F_SETFL, O_NONBLOCK);
  child.out = {out[0], stdout, {}};
  child.err = {err[0], stderr, {}};
  return Status::OK();
}

void WriteJob(Child& child) {
  if (child.stdin_fd < 0 || child.unsent.empty()) return;
  ssize_t n = write(child.stdin_fd, child.unsent.data(), child.unsent.size());
  if (n > 0) child.unsent.erase(0, static_cast<size_t>(n));
  // EPIPE: ssh is gone; its exit status tells why.
  if (n < 0 && errno != EAGAIN && errno != EINTR) child.unsent.clear();
}

class Supervisor {
 public:
  explicit Supervisor(const LaunchJob& job) : job_(job) {}

  int Run() {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      std::fprintf(stderr, "pstrain launch: pipe: %s\n", std::strerror(errno));
      return 1;
    }
    struct sigaction sa = {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);

    children_.reserve(job_.plan.nodes.size());
    for (const LaunchNode& node : job_.plan.nodes) {
      Child& child = children_.emplace_back();
      child.node = node;
      child.prefix = Prefix(node);
      child.unsent = JobPayload(
          NodeEnv(job_.env, job_.plan, node, job_.sched_host, job_.sched_port), job_.config_text);
      if (Status st = Spawn(job_, child); !st.ok()) {
        Fail(fmt::format("{}: {}", LaunchNodeName(node), st.message()));
        child.exited = true;
        child.status = 1;
        break;
      }
    }
    Loop();
    return Result();
  }

 private:
  void Loop() {
    while (!AllDone()) {
      std::vector<pollfd> fds = {{g_signal_pipe[0], POLLIN, 0}};
      std::vector<std::pair<Child*, Stream*>> streams;
      for (Child& c : children_) {
        for (Stream* s : {&c.out, &c.err}) {
          if (s->fd < 0) continue;
          fds.push_back({s->fd, POLLIN, 0});
          streams.emplace_back(&c, s);
        }
      }
      std::vector<Child*> writers;
      for (Child& c : children_) {
        if (c.stdin_fd < 0 || c.unsent.empty()) continue;
        fds.push_back({c.stdin_fd, POLLOUT, 0});
        writers.push_back(&c);
      }
      int n = poll(fds.data(), fds.size(), kPollMs);
      if (n < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) OnSignals();
      for (size_t i = 0; i < streams.size(); ++i)
        if (fds[1 + i].revents & (POLLIN | POLLHUP | POLLERR))
          Drain(*streams[i].first, *streams[i].second);
      for (size_t i = 0; i < writers.size(); ++i)
        if (fds[1 + streams.size() + i].revents & (POLLOUT | POLLERR | POLLHUP))
          WriteJob(*writers[i]);
      Reap();
      Escalate();
    }
    for (Child& c : children_) {
      CloseFd(c.stdin_fd);
      CloseFd(c.out.fd);
      CloseFd(c.err.fd);
    }
  }

  void OnSignals() {
    char sigs[16];
    ssize_t n = read(g_signal_pipe[0], sigs, sizeof sigs);
    for (ssize_t i = 0; i < n; ++i) {
      int sig = static_cast<unsigned char>(sigs[i]);
      if (!stopping_) {
        Stop(fmt::format("stopping the job ({})", strsignal(sig)));
      } else if (!killed_by_) {
        killed_by_ = sig;
        std::fprintf(stderr, "pstrain launch: %s again: ending every node now\n", strsignal(sig));
        KillAll();
      }
    }
  }

  // Closes every node's lifeline: each remote script sends its node SIGTERM.
  void Stop(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    stop_at_.reset();
    std::fprintf(stderr, "pstrain launch: %s\n", why.c_str());
    for (Child& c : children_) CloseFd(c.stdin_fd);
    // The nodes' own stop and the remote scripts' SIGKILL both fit in the
    // grace period; ssh itself gets a little more before it is ended here.
    kill_at_ = Clock::now() + std::chrono::seconds(job_.grace_s + 10);
  }

  void Fail(const std::string& why) {
    if (failure_.empty()) failure_ = why;
    Stop(why + ": stopping the job");
  }

  void KillAll() {
    for (Child& c : children_)
      if (!c.exited && c.pid > 0) kill(c.pid, SIGTERM);
  }

  void Reap() {
    for (Child& c : children_) {
      if (c.exited || c.pid <= 0) continue;
      int wstatus = 0;
      pid_t r = waitpid(c.pid, &wstatus, WNOHANG);
      if (r != c.pid) continue;
      c.exited = true;
      c.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
      CloseFd(c.stdin_fd);
      exited_at_ = Clock::now();
      OnExit(c);
    }
  }

  void OnExit(const Child& c) {
    std::string name = LaunchNodeName(c.node);
    std::string detail = c.last_err.empty() ? "" : ": " + c.last_err;
    if (!stopping_ && c.status == kSshFailed) {
      Fail(fmt::format("{}: ssh failed (exit 255){}", name, detail));
    } else if (!stopping_ && c.status == kRemoteSetupFailed) {
      Fail(fmt::format("{}: the node could not be started{}", name, detail));
    } else if (!stopping_ && c.node.role == Role::kScheduler) {
      // The job is over; the others get the grace period to end by themselves.
      stop_at_ = Clock::now() + std::chrono::seconds(job_.grace_s);
      kill_at_ = *stop_at_ + std::chrono::seconds(job_.grace_s + 10);
    }
  }

  void Escalate() {
    auto now = Clock::now();
    if (stop_at_ && now >= *stop_at_) {
      for (Child& c : children_)
        if (!c.exited)
          std::fprintf(stderr, "pstrain launch: %s still runs %d s after the scheduler ended\n",
                       LaunchNodeName(c.node).c_str(), job_.grace_s);
      Stop("stopping the nodes left");
    }
    if (kill_at_ && now >= *kill_at_) {
      kill_at_.reset();
      KillAll();
    }
  }

  // Every ssh has ended and said all it had to say; a stream still open 2 s
  // after its process ended belongs to a process the node left behind.
  bool AllDone() const {
    for (const Child& c : children_) {
      if (!c.exited) return false;
      bool open = c.out.fd >= 0 || c.err.fd >= 0;
      if (open && Clock::now() - exited_at_ < std::chrono::seconds(2)) return false;
    }
    return true;
  }

  int Result() const {
    if (killed_by_) return 128 + *killed_by_;
    if (!failure_.empty()) {
      std::fprintf(stderr, "pstrain launch: %s\n", failure_.c_str());
      return 1;
    }
    const Child& sched = children_.front();
    if (sched.status != 0) return sched.status;
    for (const Child& c : children_) {
      if (c.status == 0) continue;
      std::fprintf(stderr, "pstrain launch: %s exited %d while the scheduler exited 0\n",
                   LaunchNodeName(c.node).c_str(), c.status);
      return 1;
    }
    return 0;
  }

  const LaunchJob& job_;
  std::vector<Child> children_;
  bool stopping_ = false;  // every lifeline is closed
  std::string failure_;
  std::optional<int> killed_by_;
  std::optional<Clock::time_point> stop_at_, kill_at_;
  Clock::time_point exited_at_ = Clock::now();
};

}  // namespace

int SuperviseLaunch(const LaunchJob& job) { return Supervisor(job).Run(); }

}  // namespace pstrain
