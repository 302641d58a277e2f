#include "roles/worker_place.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <sstream>

#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

constexpr char kSection[] = "place";

std::string Text(const WorkerPlace& p) {
  return fmt::format(
      "step {}\nrank {}\nworkers {}\nbatch_size {}\nseed {}\nshuffle {}\nsteps_per_epoch {}\n"
      "epoch {}\nposition {}\ntraining_forwards {}\nlr_schedule {}\n",
      p.step, p.rank, p.workers, p.batch_size, p.seed, p.shuffle ? 1 : 0, p.steps_per_epoch,
      p.epoch, p.position, p.training_forwards, p.lr_schedule);
}

template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// "lr 0.05 x0.1 every 2340 updates" or "lr 0.05 constant".
std::string Schedule(const OptimizerConfig& o) {
  if (o.lr_decay_steps <= 0) return fmt::format("lr {} constant", o.lr);
  return fmt::format("lr {} x{} every {} updates", o.lr, o.lr_decay, o.lr_decay_steps);
}

}  // namespace

std::string WorkerPlaceFileName(int rank) { return fmt::format("worker-{}.ckpt", rank); }

StatusOr<std::string> WriteWorkerPlace(const std::string& step_dir, const WorkerPlace& place) {
  const std::string text = Text(place);
  const std::string name = WorkerPlaceFileName(place.rank);
  PSTRAIN_RETURN_IF_ERROR(
      WriteCheckpointFile(step_dir + "/" + name, {{kSection, text.data(), text.size()}}));
  return name;
}

StatusOr<WorkerPlace> ReadWorkerPlace(const std::string& path) {
  auto sections = ReadCheckpointFile(path);
  if (!sections.ok()) return sections.status();
  if (sections->size() != 1 || (*sections)[0].name != kSection)
    return InvalidArgument(
        fmt::format("{}: not a worker's place (no '{}' section)", path, kSection));
  std::map<std::string, std::string> values;
  std::istringstream lines(std::string((*sections)[0].bytes.begin(), (*sections)[0].bytes.end()));
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    values[line.substr(0, space)] = line.substr(space + 1);
  }
  WorkerPlace p;
  Status bad = Status::OK();
  auto number = [&](const char* key, auto* out) {
    auto it = values.find(key);
    if (bad.ok() && (it == values.end() || !ParseNumber(it->second, out)))
      bad = InvalidArgument(fmt::format("{}: no valid '{}'", path, key));
  };
  int shuffle = 0;
  number("step", &p.step);
  number("rank", &p.rank);
  number("workers", &p.workers);
  number("batch_size", &p.batch_size);
  number("seed", &p.seed);
  number("shuffle", &shuffle);
  number("steps_per_epoch", &p.steps_per_epoch);
  number("epoch", &p.epoch);
  number("position", &p.position);
  number("training_forwards", &p.training_forwards);
  PSTRAIN_RETURN_IF_ERROR(bad);
  p.shuffle = shuffle != 0;
  auto schedule = values.find("lr_schedule");
  if (schedule == values.end()) return InvalidArgument(fmt::format("{}: no 'lr_schedule'", path));
  p.lr_schedule = schedule->second;
  if (p.steps_per_epoch <= 0 || p.position < 0 || p.position >= p.steps_per_epoch ||
      p.epoch * p.steps_per_epoch + p.position != p.step)
    return InvalidArgument(
        fmt::format("{}: epoch {} position {} with {} steps per epoch is not step {}", path,
                    p.epoch, p.position, p.steps_per_epoch, p.step));
  return p;
}

Status CheckSameRun(const WorkerPlace& saved, const WorkerPlace& now, const std::string& path) {
  auto differ = [&](const char* key, const auto& a, const auto& b) {
    return FailedPrecondition(fmt::format(
        "resuming from {}: {} is {} in the checkpoint, {} in this run", path, key, a, b));
  };
  if (saved.step != now.step) return differ("step", saved.step, now.step);
  if (saved.rank != now.rank) return differ("rank", saved.rank, now.rank);
  if (saved.workers != now.workers) return differ("workers", saved.workers, now.workers);
  if (saved.batch_size != now.batch_size)
    return differ("batch_size", saved.batch_size, now.batch_size);
  if (saved.seed != now.seed) return differ("seed", saved.seed, now.seed);
  if (saved.shuffle != now.shuffle) return differ("shuffle", saved.shuffle, now.shuffle);
  if (saved.steps_per_epoch != now.steps_per_epoch)
    return differ("steps_per_epoch (was the data changed?)", saved.steps_per_epoch,
                  now.steps_per_epoch);
  if (saved.lr_schedule != now.lr_schedule)
    return differ("lr_schedule", "'" + saved.lr_schedule + "'", "'" + now.lr_schedule + "'");
  return Status::OK();
}

std::string LrScheduleText(const Config& config, const std::vector<std::string>& params) {
  // Parameters grouped by schedule, in order of first appearance.
  std::vector<std::pair<std::string, std::string>> groups;
  bool decays = false;
  for (const std::string& name : params) {
    const OptimizerConfig o = OptimizerFor(config, name);
    decays = decays || o.lr_decay_steps > 0;
    const std::string schedule = Schedule(o);
    auto it = groups.begin();
    while (it != groups.end() && it->first != schedule) ++it;
    if (it == groups.end()) {
      groups.emplace_back(schedule, name);
    } else {
      it->second += "," + name;
    }
  }
  std::string text = decays ? "" : "none (constant lr) ";
  for (size_t i = 0; i < groups.size(); ++i)
    text += fmt::format("{}{}: {}", i > 0 ? "; " : "", groups[i].first, groups[i].second);
  return text;
}

}  // namespace pstrain
