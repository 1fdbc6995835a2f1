// LS_CHECK: invariant checks for kernel wrappers and tensor ops. A failed check is a bug in
// lockstep (shapes are validated at module boundaries with Status), so it aborts with a
// message naming the file, line, condition and an optional streamed explanation:
//   LS_CHECK(a.numel() == b.numel()) << "CopyFrom " << a.numel() << " vs " << b.numel();
#pragma once

#include <sstream>

namespace lockstep::tensor::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* expr);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace lockstep::tensor::detail

#ifndef LS_CHECK
#define LS_CHECK(cond)                                \
  if (__builtin_expect(static_cast<bool>(cond), 1)) { \
  } else                                              \
    ::lockstep::tensor::detail::CheckFailure(__FILE__, __LINE__, #cond)
#endif
