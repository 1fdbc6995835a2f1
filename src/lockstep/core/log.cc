#include "lockstep/core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace lockstep::log {
namespace {

Level InitialLevel() {
  const char* env = std::getenv("LOCKSTEP_LOG");
  if (env == nullptr) return Level::INFO;
  if (std::strcmp(env, "debug") == 0) return Level::DEBUG;
  if (std::strcmp(env, "warn") == 0) return Level::WARN;
  if (std::strcmp(env, "error") == 0) return Level::ERROR;
  return Level::INFO;
}

std::atomic<int> g_level{static_cast<int>(InitialLevel())};
thread_local std::string t_prefix;

const char* LevelTag(Level l) {
  switch (l) {
    case Level::DEBUG:
      return "debug: ";
    case Level::INFO:
      return "";
    case Level::WARN:
      return "warning: ";
    case Level::ERROR:
      return "error: ";
  }
  return "";
}

}  // namespace

void SetLevel(Level level) { g_level.store(static_cast<int>(level)); }
Level GetLevel() { return static_cast<Level>(g_level.load()); }
void SetThreadPrefix(const std::string& prefix) { t_prefix = prefix; }

Line::~Line() {
  std::string text = "lockstep: " + t_prefix + LevelTag(level_) + stream_.str() + "\n";
  ssize_t ignored = ::write(2, text.data(), text.size());
  (void)ignored;
}

}  // namespace lockstep::log
