// Status: the error type that crosses module boundaries (modelled on leveldb's Status).
// A Status is cheap to copy when ok (no allocation). Thread-compatible, not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace lockstep {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: flags, config keys or values
  kNotFound,         // a file, key or checkpoint that does not exist
  kIoError,          // the operating system refused a read or write
  kCorruption,       // data on disk or on the wire failed a check
  kTimeout,          // a wait ran past its deadline
  kAborted,          // another rank failed, the operation was abandoned
  kUnimplemented,
  kInternal,     // a lockstep bug
  kNonFinite,    // training produced a NaN/inf gradient or loss: retrying the same data cannot help
  kUnavailable,  // too few workers are left to go on (elastic recovery, --min-nproc)
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status NonFinite(std::string m) { return {StatusCode::kNonFinite, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message without the code name; empty when ok.
  const std::string& message() const;
  // "InvalidArgument: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: message" (no-op when ok).
  Status WithContext(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

}  // namespace lockstep

// Propagates a non-ok Status (or the Status of a failed Result) to the caller.
#define LS_RETURN_IF_ERROR(expr)                                \
  do {                                                          \
    ::lockstep::Status ls_status_ = ::lockstep::ToStatus(expr); \
    if (!ls_status_.ok()) return ls_status_;                    \
  } while (0)

namespace lockstep {
inline const Status& ToStatus(const Status& s) { return s; }
}  // namespace lockstep
