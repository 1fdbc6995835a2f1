// Minimal leveled logging to stderr: LS_LOG(INFO) << "x=" << x;
// Each message is written with one write() so lines from different ranks never interleave.
#pragma once

#include <sstream>

namespace lockstep::log {

enum class Level { DEBUG = 0, INFO = 1, WARN = 2, ERROR = 3 };

void SetLevel(Level level);
Level GetLevel();
// A prefix such as "[rank 1] " added to every line this thread writes.
void SetThreadPrefix(const std::string& prefix);

class Line {
 public:
  explicit Line(Level level) : level_(level) {}
  ~Line();
  template <typename T>
  Line& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  Level level_;
  std::ostringstream stream_;
};

}  // namespace lockstep::log

#define LS_LOG(level)                                                \
  if (::lockstep::log::Level::level < ::lockstep::log::GetLevel()) { \
  } else                                                             \
    ::lockstep::log::Line(::lockstep::log::Level::level)
