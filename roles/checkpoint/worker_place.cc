#include "roles/checkpoint/worker_place.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>

#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

constexpr char kSection[] = "place";

}  // namespace

std::string WorkerPlaceText(const WorkerPlace& p) {
  return fmt::format(
             "step {}\nrank {}\nworkers {}\nbatch_size {}\nseed {}\nshuffle {}\nsteps_per_epoch "
             "{}\n"
             "epoch {}\nposition {}\nepoch_start {}\nskip_samples {}\ntraining_forwards {}\n"
             "lr_schedule {}\n",
             p.step, p.rank, p.workers, p.batch_size, p.seed, p.shuffle ? 1 : 0, p.steps_per_epoch,
             p.epoch, p.position, p.epoch_start, p.skip_samples, p.training_forwards,
             p.lr_schedule) +
         (p.make_up.empty() ? "" : "make_up " + PositionRangesText(p.make_up) + "\n");
}

namespace {

template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// "lr 0.05 x0.1 every 2340 updates", "lr 0.05 constant", "lr 0.05 after a
// warm-up of 500 updates, cosine to 0 over 9000 updates".
std::string Schedule(const OptimizerConfig& o) {
  std::string text = fmt::format("lr {}", o.lr);
  if (o.warmup_steps > 0) text += fmt::format(" after a warm-up of {} updates,", o.warmup_steps);
  if (o.lr_decay_steps > 0)
    return text + fmt::format(" x{} every {} updates", o.lr_decay, o.lr_decay_steps);
  if (o.cosine_steps > 0)
    return text + fmt::format(" cosine to {} over {} updates", o.min_lr, o.cosine_steps);
  return text + " constant";
}

}  // namespace

StatusOr<std::string> WriteWorkerPlace(const std::string& step_dir, const WorkerPlace& place) {
  const std::string text = WorkerPlaceText(place);
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
  return ParseWorkerPlace(std::string((*sections)[0].bytes.begin(), (*sections)[0].bytes.end()),
                          path);
}

StatusOr<WorkerPlace> ParseWorkerPlace(const std::string& text, const std::string& path) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
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
  // Absent in older checkpoints, whose epochs all had steps_per_epoch steps.
  p.epoch_start = p.epoch * p.steps_per_epoch;
  if (values.count("epoch_start") > 0) number("epoch_start", &p.epoch_start);
  if (values.count("skip_samples") > 0) number("skip_samples", &p.skip_samples);
  PSTRAIN_RETURN_IF_ERROR(bad);
  if (auto make_up = values.find("make_up"); make_up != values.end()) {
    auto ranges = ParsePositionRanges(make_up->second);
    if (!ranges.ok()) return ranges.status().WithContext(path + ": make_up");
    p.make_up = std::move(*ranges);
    PSTRAIN_RETURN_IF_ERROR(p.Rest().Check().WithContext(path));
  }
  if (p.steps_per_epoch <= 0 || p.position < 0 || p.position >= p.steps_per_epoch || p.epoch < 0 ||
      p.epoch_start < 0 || p.skip_samples < 0 || p.epoch_start + p.position != p.step)
    return InvalidArgument(fmt::format(
        "{}: epoch {} (begun at step {}) position {} with {} steps per epoch is not step {}", path,
        p.epoch, p.epoch_start, p.position, p.steps_per_epoch, p.step));
  return p;
}

Status CheckSameRun(const WorkerPlace& saved, const WorkerPlace& now, const std::string& path,
                    int64_t samples) {
  auto differ = [&](const char* key, const auto& a, const auto& b) {
    return FailedPrecondition(fmt::format(
        "resuming from {}: {} is {} in the checkpoint, {} in this run", path, key, a, b));
  };
  if (saved.step != now.step) return differ("step", saved.step, now.step);
  const bool reshard = saved.workers != now.workers;
  if (!reshard && saved.rank != now.rank) return differ("rank", saved.rank, now.rank);
  if (saved.batch_size != now.batch_size)
    return differ("batch_size", saved.batch_size, now.batch_size);
  if (saved.seed != now.seed) return differ("seed", saved.seed, now.seed);
  if (saved.shuffle != now.shuffle) return differ("shuffle", saved.shuffle, now.shuffle);
  if (!reshard && saved.steps_per_epoch != now.steps_per_epoch)
    return differ("steps_per_epoch (was the data changed?)", saved.steps_per_epoch,
                  now.steps_per_epoch);
  if (reshard && samples >= 0 && saved.workers > 0 && saved.batch_size > 0) {
    // What the saved run's epochs were, from this run's data.
    const int64_t expected = samples / (int64_t{saved.batch_size} * saved.workers);
    if (expected != saved.steps_per_epoch)
      return FailedPrecondition(fmt::format(
          "resuming from {}: steps_per_epoch is {} in the checkpoint ({} workers), but {} "
          "samples make {} with {} workers (was the data changed?)",
          path, saved.steps_per_epoch, saved.workers, samples, expected, saved.workers));
  }
  if (saved.lr_schedule != now.lr_schedule)
    return differ("lr_schedule", "'" + saved.lr_schedule + "'", "'" + now.lr_schedule + "'");
  return Status::OK();
}

int64_t EpochPlan::Epoch(int64_t step) const {
  const int64_t k = step - start_step;
  if (k < first_left) return first_epoch;
  return first_epoch + 1 + (k - first_left) / steps_per_epoch;
}

int64_t EpochPlan::InEpoch(int64_t step) const {
  const int64_t k = step - start_step;
  if (k < first_left) return first_done + k;
  return (k - first_left) % steps_per_epoch;
}

int64_t EpochPlan::EpochSteps(int64_t epoch) const {
  return epoch == first_epoch ? first_done + first_left : steps_per_epoch;
}

int64_t EpochPlan::TotalSteps(int64_t epochs) const {
  if (epochs <= first_epoch) return start_step;
  return start_step + first_left + (epochs - first_epoch - 1) * steps_per_epoch;
}

EpochPlan PlanEpochs(const WorkerPlace& start, const WorkerPlace& now, int64_t samples,
                     bool by_file, const std::function<int64_t(int64_t)>& steps_for) {
  EpochPlan plan;
  plan.start_step = start.step;
  plan.first_epoch = start.epoch;
  plan.steps_per_epoch = now.steps_per_epoch;
  const int64_t global = int64_t{now.batch_size} * now.workers;
  auto steps_of = [&](int64_t remaining) {
    return steps_for ? steps_for(remaining) : remaining / global;
  };
  if (start.workers == now.workers) {
    plan.first_done = start.position;
    plan.skip_samples = start.skip_samples;
    plan.make_up = start.make_up;
    const bool whole = start.skip_samples == 0 && start.make_up.empty();
    const int64_t epoch_steps = whole ? now.steps_per_epoch : steps_of(start.Rest().Size(samples));
    plan.first_left = std::max<int64_t>(epoch_steps - start.position, 0);
  } else if (by_file) {
    // An interrupted epoch is left; one not begun is trained whole.
    plan.first_epoch = start.position > 0 || start.skip_samples > 0 ? start.epoch + 1 : start.epoch;
    plan.first_left = now.steps_per_epoch;
  } else {
    const EpochRest rest =
        start.Rest().After(start.position * start.workers * int64_t{start.batch_size}, samples);
    plan.skip_samples = rest.skip;
    plan.make_up = rest.make_up;
    plan.first_left = steps_of(rest.Size(samples));
  }
  if (plan.first_left == 0) {  // nothing left of it: the next epoch, whole
    plan.first_epoch = start.epoch + 1;
    plan.first_done = 0;
    plan.skip_samples = 0;
    plan.make_up.clear();
    plan.first_left = now.steps_per_epoch;
  }
  return plan;
}

StatusOr<WorkerPlace> WithUntrainedBatches(const WorkerPlace& place, const std::vector<int>& lost,
                                           int64_t from, int64_t samples) {
  const int64_t batch = place.batch_size;
  const int64_t global = batch * place.workers;
  std::vector<int> ranks = lost;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (int rank : ranks)
    if (rank < 0 || rank >= place.workers || from < 0 || from > place.step || global <= 0)
      return InvalidArgument(
          fmt::format("worker {}'s batches from step {}: the place is of {} "
                      "workers at step {}",
                      rank, from + 1, place.workers, place.step));
  const int64_t first = place.position - (place.step - from);  // the batch of `from`
  if (first < 0)
    return FailedPrecondition(fmt::format(
        "the lost workers' batches from step {} lie in an epoch before step {}'s: they cannot be "
        "made up in it",
        from + 1, place.step + 1));
  const EpochRest rest = place.Rest();
  WorkerPlace out = place;
  out.make_up.clear();
  for (int64_t k = first; k < place.position; ++k) {
    for (int rank : ranks) {
      const int64_t begin = (k * place.workers + rank) * batch;
      for (const PositionRange& r : rest.Slice(begin, begin + batch, samples))
        AppendRange(&out.make_up, r);
    }
  }
  const EpochRest after = rest.After(place.position * global, samples);
  for (const PositionRange& r : after.make_up) AppendRange(&out.make_up, r);
  if (out.make_up.size() > kMaxMakeUpRanges)
    return FailedPrecondition(fmt::format(
        "the lost workers' batches make {} ranges of the epoch's order to train first, more than "
        "a place holds ({})",
        out.make_up.size(), kMaxMakeUpRanges));
  out.skip_samples = after.skip;
  out.position = 0;
  out.epoch_start = place.step;
  return out;
}

std::string DescribeReshard(const WorkerPlace& saved, const WorkerPlace& now, const EpochPlan& plan,
                            bool live) {
  std::string how =
      live ? fmt::format("{} workers reached step {}, {} go on from it: data re-sharded; ",
                         saved.workers, saved.step, now.workers)
           : fmt::format(
                 "the checkpoint of step {} was written by {} workers, this run has {}: "
                 "data re-sharded; ",
                 saved.step, saved.workers, now.workers);
  const int64_t made_up = EpochRest{plan.make_up, 0}.MakeUpSize();
  if (plan.first_epoch == saved.epoch && (plan.skip_samples > 0 || made_up > 0)) {
    how += fmt::format(
        "epoch {} goes on after the {} samples of its order already trained{}, with {} steps of "
        "{} x {}",
        saved.epoch + 1, plan.skip_samples - made_up,
        made_up > 0 ? fmt::format(" ({} of a lost worker's first)", made_up) : "", plan.first_left,
        now.workers, now.batch_size);
  } else if (plan.first_epoch == saved.epoch) {
    how += fmt::format("epoch {} starts from its beginning", saved.epoch + 1);
  } else {
    how += fmt::format(
        "the rest of epoch {} is skipped (with file shards which samples of the new shards were "
        "trained is unknown); epoch {} starts",
        saved.epoch + 1, plan.first_epoch + 1);
  }
  return how + fmt::format(", then {} steps per epoch; the step count goes on from {}",
                           plan.steps_per_epoch, saved.step);
}

std::string LrScheduleText(const Config& config, const std::vector<std::string>& params) {
  // Parameters grouped by schedule, in order of first appearance.
  std::vector<std::pair<std::string, std::string>> groups;
  bool decays = false;
  for (const std::string& name : params) {
    const OptimizerConfig o = OptimizerFor(config, name);
    decays = decays || o.lr_decay_steps > 0 || o.cosine_steps > 0 || o.warmup_steps > 0;
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
