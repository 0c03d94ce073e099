#include "pjrt/errors.h"

#include <new>
#include <string>
#include <utility>

#include "pjrt/entry_points.h"

namespace jaxmlx::pjrt {
namespace {

static_assert(static_cast<int>(Code::kOk) == PJRT_Error_Code_OK);
static_assert(static_cast<int>(Code::kInvalidArgument) == PJRT_Error_Code_INVALID_ARGUMENT);
static_assert(static_cast<int>(Code::kUnimplemented) == PJRT_Error_Code_UNIMPLEMENTED);
static_assert(static_cast<int>(Code::kUnauthenticated) == PJRT_Error_Code_UNAUTHENTICATED);

const Error* as_error(const PJRT_Error* error) { return static_cast<const Error*>(error); }

void error_destroy(PJRT_Error* error) { delete static_cast<Error*>(error); }

void error_message(const PJRT_Error* error, const char** message, size_t* message_size) {
  const std::string& m = as_error(error)->message;
  *message = m.data();
  *message_size = m.size();
}

PJRT_Error_Code error_get_code(const PJRT_Error* error) {
  return static_cast<PJRT_Error_Code>(as_error(error)->code);
}

// We attach no payloads.
void error_for_each_payload(const PJRT_Error*, PJRT_Error_PayloadVisitor, void*) {}

// Same accessors, but destroy is a no-op: for the preallocated out-of-memory error.
void static_error_destroy(PJRT_Error*) {}

const PJRT_Error_FunctionTable kStaticErrorFunctionTable = {
    /*struct_size=*/PJRT_Error_FunctionTable_STRUCT_SIZE,
    /*instance_size=*/PJRT_Error_STRUCT_SIZE,
    /*extension_start=*/nullptr,
    /*destroy=*/static_error_destroy,
    /*message=*/error_message,
    /*get_code=*/error_get_code,
    /*for_each_payload=*/error_for_each_payload,
};

PJRT_Error* out_of_memory_error() {
  static Error* const kError = [] {
    auto* e = new Error();
    e->vtable = &kStaticErrorFunctionTable;
    e->code = Code::kResourceExhausted;
    e->message = "out of host memory while creating an error";
    return e;
  }();
  return kError;
}

// A table is usable if it is present and long enough to hold `field`'s end.
bool table_has(const PJRT_Error* error, size_t needed) {
  return error != nullptr && error->vtable != nullptr && error->vtable->struct_size >= needed;
}

}  // namespace

const PJRT_Error_FunctionTable kErrorFunctionTable = {
    /*struct_size=*/PJRT_Error_FunctionTable_STRUCT_SIZE,
    /*instance_size=*/PJRT_Error_STRUCT_SIZE,
    /*extension_start=*/nullptr,
    /*destroy=*/error_destroy,
    /*message=*/error_message,
    /*get_code=*/error_get_code,
    /*for_each_payload=*/error_for_each_payload,
};

PJRT_Error* make_error(Code code, std::string message) noexcept {
  if (code == Code::kOk) return nullptr;
  try {
    auto* e = new Error();
    e->vtable = &kErrorFunctionTable;
    e->code = code;
    e->message = std::move(message);
    return e;
  } catch (...) {
    return out_of_memory_error();
  }
}

PJRT_Error* make_error(const Status& status) noexcept {
  if (status.ok()) return nullptr;
  try {
    return make_error(status.code(), status.message());
  } catch (...) {
    return out_of_memory_error();
  }
}

Status to_status(const PJRT_Error* error) {
  if (error == nullptr) return Status();
  if (!table_has(error, jaxmlx_pjrt_field_end(PJRT_Error_FunctionTable, get_code))) {
    return internal_error("PJRT_Error without a usable function table");
  }
  const char* message = nullptr;
  size_t size = 0;
  error->vtable->message(error, &message, &size);
  auto code = static_cast<Code>(error->vtable->get_code(error));
  if (code == Code::kOk) code = Code::kUnknown;  // an error object must not read as success
  return Status(code, std::string(message ? message : "", message ? size : 0));
}

Status take_status(PJRT_Error* error) {
  Status status = to_status(error);
  if (table_has(error, jaxmlx_pjrt_field_end(PJRT_Error_FunctionTable, destroy))) {
    error->vtable->destroy(error);
  }
  return status;
}

PJRT_Error* callback_error(PJRT_Error_Code code, const char* message, size_t message_size) {
  try {
    return make_error(static_cast<Code>(code),
                      message ? std::string(message, message_size) : std::string());
  } catch (...) {
    return out_of_memory_error();
  }
}

PJRT_CallbackError* callback_error_fn() {
  static PJRT_CallbackError fn = &callback_error;
  return &fn;
}

PJRT_Error* check_struct_size(std::string_view function, std::string_view what, size_t actual,
                              size_t needed) noexcept {
  if (actual >= needed) return nullptr;
  try {
    return make_error(Code::kInvalidArgument, std::string(function) + ": " + std::string(what) +
                                                  " is " + std::to_string(actual) +
                                                  ", the plugin needs at least " +
                                                  std::to_string(needed));
  } catch (...) {
    return out_of_memory_error();
  }
}

PJRT_Error* check_not_null(std::string_view function, const void* pointer,
                           std::string_view what) noexcept {
  if (pointer != nullptr) return nullptr;
  try {
    return make_error(Code::kInvalidArgument,
                      std::string(function) + ": " + std::string(what) + " is null");
  } catch (...) {
    return out_of_memory_error();
  }
}

PJRT_Error* exception_error(std::string_view function, const char* what) noexcept {
  try {
    std::string m(function);
    m += what ? ": uncaught exception: " : ": unknown exception";
    if (what) m += what;
    return make_error(Code::kInternal, std::move(m));
  } catch (...) {
    return out_of_memory_error();
  }
}

// ---------------------------------------------------------------- Error_* entry points
// Dispatch through the error's own table so that any PJRT_Error works, not only ours. These
// slots are lenient about struct_size: Destroy/Message cannot report a failure, and jaxlib aborts
// if ForEachPayload fails.

void Error_Destroy(PJRT_Error_Destroy_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  if (table_has(args->error, jaxmlx_pjrt_field_end(PJRT_Error_FunctionTable, destroy))) {
    args->error->vtable->destroy(args->error);
  }
}

void Error_Message(PJRT_Error_Message_Args* args) {
  if (args == nullptr) return;
  args->message = "";
  args->message_size = 0;
  if (table_has(args->error, jaxmlx_pjrt_field_end(PJRT_Error_FunctionTable, message))) {
    args->error->vtable->message(args->error, &args->message, &args->message_size);
  }
}

PJRT_Error* Error_GetCode(PJRT_Error_GetCode_Args* args) {
  if (PJRT_Error* e = check_not_null("PJRT_Error_GetCode", args, "args")) return e;
  if (PJRT_Error* e = check_not_null("PJRT_Error_GetCode", args->error, "args->error")) return e;
  args->code = PJRT_Error_Code_UNKNOWN;
  if (table_has(args->error, jaxmlx_pjrt_field_end(PJRT_Error_FunctionTable, get_code))) {
    args->code = args->error->vtable->get_code(args->error);
  }
  return nullptr;
}

PJRT_Error* Error_ForEachPayload(PJRT_Error_ForEachPayload_Args* args) {
  if (args == nullptr || args->error == nullptr || args->visitor == nullptr) return nullptr;
  if (table_has(args->error, jaxmlx_pjrt_field_end(PJRT_Error_FunctionTable, for_each_payload))) {
    args->error->vtable->for_each_payload(args->error, args->visitor, args->user_arg);
  }
  return nullptr;
}

}  // namespace jaxmlx::pjrt
