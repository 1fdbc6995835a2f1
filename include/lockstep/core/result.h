// Result<T>: a value or the Status that explains why there is none.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <type_traits>
#include <utility>

#include "lockstep/core/status.h"

namespace lockstep {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  // A value of another type that converts to T: `return std::make_unique<Derived>();` from a
  // function returning Result<std::unique_ptr<Base>>.
  template <typename U>
  requires(!std::is_same_v<std::remove_cvref_t<U>, T> && !std::is_same_v<std::remove_cvref_t<U>, Status> &&
           std::is_convertible_v<U&&, T>) Result(U&& value)
      : value_(T(std::forward<U>(value))) {}            // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::Internal("Result built from an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // Accessing the value of a failed Result is a lockstep bug, not a user error.
  T& value() & {
    check();
    return *value_;
  }
  const T& value() const& {
    check();
    return *value_;
  }
  T&& value() && {
    check();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const {
    if (!value_) {
      std::fprintf(stderr, "lockstep: internal error: value of failed Result: %s\n", status_.ToString().c_str());
      std::abort();
    }
  }
  std::optional<T> value_;
  Status status_;
};

template <typename T>
const Status& ToStatus(const Result<T>& r) {
  return r.status();
}

}  // namespace lockstep

#define LS_CONCAT_INNER(a, b) a##b
#define LS_CONCAT(a, b) LS_CONCAT_INNER(a, b)
// LS_ASSIGN_OR_RETURN(auto x, MakeX()): binds the value or returns the failure.
#define LS_ASSIGN_OR_RETURN(lhs, expr) LS_ASSIGN_OR_RETURN_IMPL(LS_CONCAT(ls_result_, __LINE__), lhs, expr)
#define LS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
