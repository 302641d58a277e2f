// Progress of a training run as a person watches it: the ETA appended to a
// worker's step log lines, and the one-line bar worker 0 draws when stdout
// is a terminal.
//
// The bar goes to stdout, the logs to stderr. When both reach the same
// terminal, every draw clears the line and leaves the cursor at its start,
// so a log line written meanwhile overwrites the bar instead of being
// appended to it; the bar is kept shorter than a log line's prefix plus a
// short message, so no tail of it is left behind. Not thread-safe: one
// training thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pstrain {

// "45s", "1m23s", "2h05m", "3d04h"; "?" when unknown (negative or not finite).
std::string FormatDuration(double seconds);

// Seconds left for `remaining` steps at `step_s` seconds a step; -1 when not
// known yet (no step timed).
double EtaSeconds(int64_t remaining, double step_s);

class ProgressBar {
 public:
  // Draws on `out` only when `out` is a terminal; otherwise every call does
  // nothing.
  explicit ProgressBar(std::FILE* out);
  bool active() const { return active_; }
  // Shows `step` of `total` steps done. Redraws at most 5 times a second,
  // and always at the last step.
  void Update(int64_t step, int64_t total, double samples_per_s, double eta_s);
  // Ends the bar's line (a newline) if anything was drawn. Idempotent.
  void Finish();

  // The bar's text for these numbers, e.g.
  // "[######--------------]  30% 120/400 812 samples/s ETA 1m23s".
  static std::string Render(int64_t step, int64_t total, double samples_per_s, double eta_s);

 private:
  std::FILE* out_;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace pstrain
