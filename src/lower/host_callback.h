// Host callbacks: the custom call through which a program calls a Python function
// (jax.debug.print, jax.debug.callback, jax.pure_callback, jax.experimental.io_callback).
// How it works is described at the top of host_callback.cc.
//
// The C part below is the plugin's second exported symbol (beside GetPjrtApi): Python installs
// its handler through it with ctypes. Thread-safety: the handler pointer is set atomically; it
// is called only on the device worker thread, one call at a time.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
#include <string_view>

#include "ir/module.h"

namespace jaxmlx::lower {

// The call_target_name of every host-callback custom call (python/jax_plugins/mlx/callbacks.py).
inline constexpr std::string_view kHostCallbackTarget = "jaxmlx.host_callback";

// True for a host-callback custom call. Such an op must call Python on every execution, so a
// program containing one is never captured into a replayed (mx::compile'd) graph.
bool is_host_callback(const ir::Op& op);

// True while the device worker is inside a host callback (calling into Python). Any thread may
// ask: a thread that holds Python's GIL must not wait for the worker then (the callback waits
// for the GIL).
bool host_callback_running();

// Held from the enqueue of a run of a program with host callbacks until that run finished:
// Python waits for such runs before it finalizes (jaxmlx_host_callbacks_running).
class PendingHostCallbackRun {
 public:
  PendingHostCallbackRun();
  ~PendingHostCallbackRun();
  PendingHostCallbackRun(const PendingHostCallbackRun&) = delete;
  PendingHostCallbackRun& operator=(const PendingHostCallbackRun&) = delete;
};

}  // namespace jaxmlx::lower

extern "C" {
#endif

// One operand or result of a host callback, in the storage form of lower/dtypes.h (f64 as its
// raw bits, c128 as pairs of them, ...): `nbytes` contiguous row-major bytes at `data`.
// `dtype` names the element type as our IR prints it ("f32", "i1", "ui8", "bf16",
// "complex<f32>", ...); `dims` has `rank` entries. Operands are read-only; results are
// preallocated by the plugin and filled by the handler.
typedef struct JaxmlxHostBuffer {
  void* data;
  int64_t nbytes;
  const char* dtype;
  const int64_t* dims;
  int64_t rank;
} JaxmlxHostBuffer;

// Calls the Python function registered under `callback_id`. Returns 0 on success; otherwise
// writes a NUL-terminated message (at most `error_capacity` bytes, truncated) to `error`.
typedef int32_t (*JaxmlxHostCallbackHandler)(uint64_t callback_id, const JaxmlxHostBuffer* args,
                                             int64_t num_args, JaxmlxHostBuffer* results,
                                             int64_t num_results, char* error,
                                             int64_t error_capacity);

// Installs (or, with NULL, removes) the handler. Exported from the plugin library.
void jaxmlx_set_host_callback_handler(JaxmlxHostCallbackHandler handler);
// How many handler calls and runs of programs with host callbacks are in progress (Python waits
// for them before it finalizes: a call cut off by finalization would unwind through the worker).
// Exported from the plugin library.
int32_t jaxmlx_host_callbacks_running(void);

#ifdef __cplusplus
}  // extern "C"
#endif
