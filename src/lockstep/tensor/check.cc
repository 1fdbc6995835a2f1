#include "lockstep/tensor/check.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace lockstep::tensor::detail {

CheckFailure::CheckFailure(const char* file, int line, const char* expr) {
  stream_ << "lockstep: internal error: check failed at " << file << ":" << line << ": " << expr << ": ";
}

CheckFailure::~CheckFailure() {
  std::string msg = stream_.str();
  msg.push_back('\n');
  // One write() so the line is not interleaved with other ranks' output.
  ssize_t unused = ::write(2, msg.data(), msg.size());
  (void)unused;
  std::abort();
}

}  // namespace lockstep::tensor::detail
