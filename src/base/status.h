// Status and Result<T>: the error channel at I/O and API boundaries.
//
// A Status is ok or carries a code and a human-readable message that names what failed (the file,
// the field, the value). Result<T> holds either a T or a non-ok Status. No exception crosses a
// module's public API; code that can fail on user input returns one of these.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace folio {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad user input: flags, JSON, request fields
  kNotFound,           // missing file or entity
  kDataLoss,           // corrupted or truncated file
  kUnimplemented,      // valid input we do not support (e.g. an architecture)
  kResourceExhausted,  // out of KV blocks, queue full, too large
  kInternal,           // a bug: an invariant broke
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "ok".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status data_loss(std::string m) {
  return {StatusCode::kDataLoss, std::move(m)};
}
inline Status unimplemented(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status resource_exhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status internal_error(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result built from an ok Status carries no value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace folio

// Propagates a non-ok Status from an expression returning Status.
#define FOLIO_RETURN_IF_ERROR(expr)        \
  do {                                     \
    ::folio::Status _folio_st = (expr);    \
    if (!_folio_st.ok()) return _folio_st; \
  } while (0)

#define FOLIO_CONCAT_INNER(a, b) a##b
#define FOLIO_CONCAT(a, b) FOLIO_CONCAT_INNER(a, b)
// `FOLIO_ASSIGN_OR_RETURN(auto x, make_x());` binds the value or returns the error.
#define FOLIO_ASSIGN_OR_RETURN(lhs, expr)                \
  auto FOLIO_CONCAT(_folio_res_, __LINE__) = (expr);     \
  if (!FOLIO_CONCAT(_folio_res_, __LINE__).ok())         \
    return FOLIO_CONCAT(_folio_res_, __LINE__).status(); \
  lhs = std::move(FOLIO_CONCAT(_folio_res_, __LINE__)).value()
