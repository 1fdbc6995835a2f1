// Progress: a one-line display that rewrites itself on a terminal, and plain log lines
// (every `log_every` steps) when stderr is a file or pipe.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::runtime {

class Progress {
 public:
  Progress(int64_t total_steps, int64_t log_every);
  ~Progress();
  // One training step finished.
  void Step(int64_t step, double loss, double lr, double tokens_or_samples_per_s, const char* unit);
  // A line that must stay visible (validation results, warnings).
  void Print(const std::string& line);
  void Finish();

 private:
  void ClearLine();
  int64_t total_;
  int64_t log_every_;
  bool tty_;
  bool dirty_ = false;
  double start_s_;
};

}  // namespace lockstep::runtime
