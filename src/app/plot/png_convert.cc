#include "src/app/plot/png_convert.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

extern char** environ;

namespace pstrain {

Status ConvertSvgToPng(const std::string& svg_path, const std::string& png_path, int timeout_s) {
  const std::string tmp = png_path + ".tmp." + std::to_string(::getpid());
  // No shell: the paths are passed as they are, whatever they contain.
  std::vector<std::string> args = {"rsvg-convert", "--format", "png", "--output", tmp, svg_path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, "rsvg-convert", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err == ENOENT) {
    return FailedPrecondition(
        "PNG output needs rsvg-convert (Debian package librsvg2-bin); "
        "install it or write .svg");
  }
  if (err != 0) return Internal(std::string("cannot start rsvg-convert: ") + std::strerror(err));

  // A child has no waitable handle with a timeout; polling every 10 ms costs
  // nothing next to rendering, and the deadline stops a stuck converter.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int wstatus = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &wstatus, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &wstatus, 0);
    std::remove(tmp.c_str());
    return Internal("rsvg-convert did not finish in " + std::to_string(timeout_s) + " s");
  }
  if (done < 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::remove(tmp.c_str());
    return Internal("rsvg-convert failed on " + svg_path);
  }
  if (std::rename(tmp.c_str(), png_path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Internal(png_path + ": cannot write: " + why);
  }
  return Status::OK();
}

}  // namespace pstrain
