#include "lockstep/trace/trace.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockstep::trace {

void TraceRecorder::Add(const char* name, const char* category, int64_t start_ns, int64_t end_ns) {
  if (enabled_) events_.push_back({name, category, start_ns, end_ns});
}

std::string TraceRecorder::Serialize(int64_t origin_ns) const {
  std::string out;
  char buf[256];
  for (const Event& e : events_) {
    std::snprintf(buf, sizeof(buf),
                  "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
                  out.empty() ? "" : ",\n", e.name, e.category, rank_, (e.start_ns - origin_ns) * 1e-3,
                  (e.end_ns - e.start_ns) * 1e-3);
    out += buf;
  }
  return out;
}

Status WriteChromeTrace(const std::string& path, const std::vector<std::string>& per_rank) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return Status::IoError("cannot write trace " + path + ": " + std::strerror(errno));
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
  for (size_t r = 0; r < per_rank.size(); ++r)
    std::fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%zu,\"args\":{\"name\":\"rank %zu\"}}",
                 r ? ",\n" : "", r, r);
  for (const std::string& events : per_rank)
    if (!events.empty()) std::fprintf(f, ",\n%s", events.c_str());
  std::fputs("\n]}\n", f);
  if (std::fclose(f) != 0) return Status::IoError("cannot write trace " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace lockstep::trace
