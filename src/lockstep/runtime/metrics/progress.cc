#include "lockstep/runtime/metrics/progress.h"

#include <unistd.h>

#include <cstdio>

#include "lockstep/core/clock.h"

namespace lockstep::runtime {
namespace {

std::string FormatDuration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof(buf), "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof(buf), "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}

}  // namespace

Progress::Progress(int64_t total_steps, int64_t log_every)
    : total_(total_steps),
      log_every_(log_every > 0 ? log_every : 1),
      tty_(isatty(2) != 0),
      start_s_(NowNanos() * 1e-9) {}

Progress::~Progress() { Finish(); }

void Progress::ClearLine() {
  if (tty_ && dirty_) {
    std::fputs("\r\033[K", stderr);
    dirty_ = false;
  }
}

void Progress::Step(int64_t step, double loss, double lr, double rate, const char* unit) {
  double elapsed = NowNanos() * 1e-9 - start_s_;
  double eta = step > 0 ? elapsed / step * (total_ - step) : 0;
  char line[256];
  std::snprintf(line, sizeof(line), "step %lld/%lld | loss %.4f | lr %.2e | %.0f %s | eta %s",
                static_cast<long long>(step), static_cast<long long>(total_), loss, lr, rate, unit,
                FormatDuration(eta).c_str());
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line);
    std::fflush(stderr);
    dirty_ = true;
  } else if (step % log_every_ == 0 || step == total_) {
    std::fprintf(stderr, "%s\n", line);
  }
}

void Progress::Print(const std::string& line) {
  ClearLine();
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Progress::Finish() { ClearLine(); }

}  // namespace lockstep::runtime
