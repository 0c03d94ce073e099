// PJRT_Error objects and the plumbing every entry point uses: argument checks and the
// exception barrier.
//
// Ownership: a PJRT_Error* returned by the plugin belongs to the caller, who frees it with
// PJRT_Error_Destroy or error->vtable->destroy (both work for every error we make). All functions
// here are thread-safe and never throw.
//
// Typical entry point:
//   PJRT_Error* Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args) {
//     return guarded(args, [&]() -> Status {    // checks args/struct_size, catches exceptions
//       RETURN_IF_ERROR(...);
//       return Status();
//     });
//   }
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.h"
#include "pjrt/abi.h"

namespace jaxmlx::pjrt {

// The layout behind every PJRT_Error the plugin returns. The PJRT_Error base (a pointer to
// kErrorFunctionTable) must stay first: the framework reads it directly at minor >= 107.
struct Error : PJRT_Error {
  Code code = Code::kUnknown;
  std::string message;
};

// Our implementation of the error function table (destroy/message/get_code/for_each_payload).
extern const PJRT_Error_FunctionTable kErrorFunctionTable;

// New error, or null when `code` is kOk. Out of memory yields a static RESOURCE_EXHAUSTED error
// (destroying it is a no-op), so the result is never null for a non-OK code.
PJRT_Error* make_error(Code code, std::string message) noexcept;
// Null for an OK status; otherwise the status's code and full text (message plus context).
PJRT_Error* make_error(const Status& status) noexcept;

// Reads any PJRT_Error (ours or another table's) as a Status; OK for null.
Status to_status(const PJRT_Error* error);
// Same, then destroys `error`.
Status take_status(PJRT_Error* error);

// A PJRT_CallbackError for caller-provided callbacks (KV store, send callbacks). Their args take
// a *pointer to* the function pointer: pass callback_error_fn().
PJRT_Error* callback_error(PJRT_Error_Code code, const char* message, size_t message_size);
PJRT_CallbackError* callback_error_fn();

// "PJRT_X: args->struct_size is 16, the plugin needs at least 48" (INVALID_ARGUMENT), or null.
PJRT_Error* check_struct_size(std::string_view function, std::string_view what, size_t actual,
                              size_t needed) noexcept;
// "PJRT_X: args->buffer is null" (INVALID_ARGUMENT), or null.
PJRT_Error* check_not_null(std::string_view function, const void* pointer,
                           std::string_view what) noexcept;

// ArgsTraits<PJRT_X_Args>: the slot's name and its args struct size at our minor.
template <typename Args>
struct ArgsTraits;
#define JAXMLX_PJRT_ARGS_TRAITS(name)                               \
  template <>                                                       \
  struct ArgsTraits<PJRT_##name##_Args> {                           \
    static constexpr std::string_view kFunction = "PJRT_" #name;    \
    static constexpr size_t kSize = PJRT_##name##_Args_STRUCT_SIZE; \
  };
#define PJRT_IMPL(name) JAXMLX_PJRT_ARGS_TRAITS(name)
#define PJRT_UNIMPL(name) JAXMLX_PJRT_ARGS_TRAITS(name)
#include "pjrt/slots.def"
#undef JAXMLX_PJRT_ARGS_TRAITS

// Checks that `args` is non-null and its struct_size covers `needed` bytes (default: the whole
// struct at our minor; pass less to accept older callers when the extra fields are not read).
template <typename Args>
PJRT_Error* check_args(const Args* args, size_t needed = ArgsTraits<Args>::kSize) noexcept {
  constexpr std::string_view fn = ArgsTraits<Args>::kFunction;
  if (args == nullptr) return check_not_null(fn, nullptr, "args");
  return check_struct_size(fn, "args->struct_size", args->struct_size, needed);
}

// INTERNAL "PJRT_X: uncaught exception: what" (or "unknown exception" for what == null).
PJRT_Error* exception_error(std::string_view function, const char* what) noexcept;

namespace internal {
// Runs body() and turns its result (PJRT_Error*, Status or void) into a PJRT_Error*.
template <typename Body>
PJRT_Error* run_body(Body& body) {
  using R = std::invoke_result_t<Body&>;
  if constexpr (std::is_void_v<R>) {
    body();
    return nullptr;
  } else if constexpr (std::is_same_v<R, Status>) {
    return make_error(body());
  } else {
    static_assert(std::is_convertible_v<R, PJRT_Error*>,
                  "guarded body must return void, Status or PJRT_Error*");
    return body();
  }
}
}  // namespace internal

// Exception barrier for code that is not an entry point (callbacks, destructors run by jaxlib).
template <typename Body>
PJRT_Error* guarded(std::string_view function, Body&& body) noexcept {
  try {
    return internal::run_body(body);
  } catch (const std::exception& e) {
    return exception_error(function, e.what());
  } catch (...) {
    return exception_error(function, nullptr);
  }
}

// True for the PJRT_X_Args structs of the 138 slots.
template <typename Args>
concept SlotArgs = requires {
  ArgsTraits<std::remove_const_t<Args>>::kSize;
};

// Entry-point barrier: check_args(args), then body(); no exception escapes.
template <SlotArgs Args, typename Body>
PJRT_Error* guarded(Args* args, Body&& body) noexcept {
  constexpr std::string_view fn = ArgsTraits<std::remove_const_t<Args>>::kFunction;
  if (PJRT_Error* e = check_args(args)) return e;
  return guarded(fn, body);
}

// Converts a PJRT_Error-returning expression into an early return.
#define JAXMLX_RETURN_IF_PJRT_ERROR(expr)                 \
  do {                                                    \
    if (PJRT_Error* _pjrt_err = (expr)) return _pjrt_err; \
  } while (0)

}  // namespace jaxmlx::pjrt
