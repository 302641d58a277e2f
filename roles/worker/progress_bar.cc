#include "roles/worker/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace pstrain {
namespace {

constexpr int kBarWidth = 20;
constexpr auto kRedrawEvery = std::chrono::milliseconds(200);

}  // namespace

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  // Capped at 999 days: a rate near zero must not print nonsense.
  const int64_t s = static_cast<int64_t>(std::min(std::llround(seconds), 999LL * 86400));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
}

double EtaSeconds(int64_t remaining, double step_s) {
  if (!(step_s > 0) || !std::isfinite(step_s)) return -1;
  return static_cast<double>(std::max<int64_t>(0, remaining)) * step_s;
}

ProgressBar::ProgressBar(std::FILE* out)
    : out_(out), active_(out != nullptr && isatty(fileno(out)) == 1) {}

std::string ProgressBar::Render(int64_t step, int64_t total, double samples_per_s, double eta_s) {
  const double done =
      total > 0 ? std::clamp(static_cast<double>(step) / static_cast<double>(total), 0.0, 1.0)
                : 0.0;
  const int filled = static_cast<int>(done * kBarWidth);
  return fmt::format("[{}{}] {:3.0f}% {}/{} {:.0f} samples/s ETA {}", std::string(filled, '#'),
                     std::string(kBarWidth - filled, '-'), 100.0 * done, step, total, samples_per_s,
                     FormatDuration(eta_s));
}

void ProgressBar::Update(int64_t step, int64_t total, double samples_per_s, double eta_s) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && step < total && now - last_draw_ < kRedrawEvery) return;
  last_draw_ = now;
  drawn_ = true;
  // \r and erase-line first, \r last: see the header on sharing a terminal.
  std::fprintf(out_, "\r\033[K%s\r", Render(step, total, samples_per_s, eta_s).c_str());
  std::fflush(out_);
}

void ProgressBar::Finish() {
  if (!drawn_) return;
  drawn_ = false;
  active_ = false;
  std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace pstrain
