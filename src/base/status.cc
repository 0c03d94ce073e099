#include "base/status.h"

namespace jaxmlx {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kCancelled: return "CANCELLED";
    case Code::kUnknown: return "UNKNOWN";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case Code::kNotFound: return "NOT_FOUND";
    case Code::kAlreadyExists: return "ALREADY_EXISTS";
    case Code::kPermissionDenied: return "PERMISSION_DENIED";
    case Code::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case Code::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Code::kAborted: return "ABORTED";
    case Code::kOutOfRange: return "OUT_OF_RANGE";
    case Code::kUnimplemented: return "UNIMPLEMENTED";
    case Code::kInternal: return "INTERNAL";
    case Code::kUnavailable: return "UNAVAILABLE";
    case Code::kDataLoss: return "DATA_LOSS";
    case Code::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

Status::Status(Code code, std::string message) {
  if (code != Code::kOk) rep_ = std::make_shared<Rep>(Rep{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::to_string() const {
  if (!rep_) return "OK";
  return std::string(code_name(rep_->code)) + ": " + rep_->message;
}

Status& Status::with_context(std::string_view context) {
  if (!rep_) return *this;
  // Copy on write: other holders of the same error keep their message.
  rep_ = std::make_shared<Rep>(Rep{rep_->code, rep_->message + "\n  " + std::string(context)});
  return *this;
}

Status invalid_argument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
Status unimplemented(std::string m) { return Status(Code::kUnimplemented, std::move(m)); }
Status internal_error(std::string m) { return Status(Code::kInternal, std::move(m)); }
Status failed_precondition(std::string m) { return Status(Code::kFailedPrecondition, std::move(m)); }
Status resource_exhausted(std::string m) { return Status(Code::kResourceExhausted, std::move(m)); }
Status not_found(std::string m) { return Status(Code::kNotFound, std::move(m)); }
Status out_of_range(std::string m) { return Status(Code::kOutOfRange, std::move(m)); }
Status data_loss(std::string m) { return Status(Code::kDataLoss, std::move(m)); }

}  // namespace jaxmlx
