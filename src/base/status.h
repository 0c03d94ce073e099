// Status and StatusOr: the error currency of everything below pjrt/.
//
// A Status carries a code (the PJRT error codes, so pjrt/ converts without a table), a message,
// and optional context lines added as the error propagates ("while lowering ... at f.py:3").
// Cheap to move; an OK status holds no allocation. Not thread-safe to mutate concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace jaxmlx {

// Values equal PJRT_Error_Code (and absl::StatusCode), so pjrt/ can pass them through.
enum class Code : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message);

  static Status ok_status() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  // The message without the code prefix.
  const std::string& message() const;
  // "INVALID_ARGUMENT: message" — what users see.
  std::string to_string() const;

  // Appends a context line ("while ..."); returns *this for chaining. No-op on OK.
  Status& with_context(std::string_view context);

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  std::shared_ptr<Rep> rep_;
};

Status invalid_argument(std::string message);
Status unimplemented(std::string message);
Status internal_error(std::string message);
Status failed_precondition(std::string message);
Status resource_exhausted(std::string message);
Status not_found(std::string message);
Status out_of_range(std::string message);
Status data_loss(std::string message);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace jaxmlx

#define JAXMLX_CONCAT_INNER(a, b) a##b
#define JAXMLX_CONCAT(a, b) JAXMLX_CONCAT_INNER(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    ::jaxmlx::Status _st = (expr);            \
    if (!_st.ok()) return _st;                \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, f());` — binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(JAXMLX_CONCAT(_status_or_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
