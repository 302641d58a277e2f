// Status and StatusOr<T>: how fallible operations report failure.
//
// A Status is OK or carries a code and a one-line message that says what went
// wrong and where ("pull key 12 from server 1: connection reset"). Context is
// prepended as the error travels up (WithContext). Exceptions never cross
// module boundaries; input from users and peers never aborts the process.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace pstrain {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input from a user or a peer
  kNotFound,            // a named thing does not exist
  kUnavailable,         // a peer cannot be reached or went away
  kDeadlineExceeded,    // gave up waiting
  kFailedPrecondition,  // the system is not in a state that allows this
  kAborted,             // the job is stopping
  kCancelled,           // stopped on request (SIGTERM, SIGINT) before the end
  kPermissionDenied,    // a peer failed authentication (MS_CLUSTER_TOKEN)
  kInternal,            // a bug or an unexpected library failure
};

// [[nodiscard]]: a dropped Status is a failure nobody hears about. Handle it,
// return it, or say why it changes nothing with IgnoreError().
class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "context: message", keeping the code.
  Status WithContext(std::string_view context) const;
  std::string ToString() const;

  // Drops this status on purpose: the caller has decided this failure changes
  // nothing. Say why in a comment next to the call.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "StatusOr needs a value or an error");
  }
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace pstrain

// Returns early from the enclosing function when `expr` is not OK.
#define PSTRAIN_RETURN_IF_ERROR(expr) \
  do {                                \
    ::pstrain::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)
