// Fault injection: makes a chosen run, allocation or host callback fail, so that every error path
// (an asynchronous run error, an out-of-memory transfer, a host callback that raised) can be
// exercised by tests without a real failure. Documented in docs/errors.md.
//
// Spec (JAXMLX_FAULT, read when a client starts, or jaxmlx_set_fault at run time):
//   spec   := entry ("," entry)*          e.g. "execute:3", "alloc:1,callback:2+"
//   entry  := point ":" N ["+"]           N >= 1: the N-th event at `point` counted from when the
//                                         spec was installed fails; with "+", it and every later
//                                         one fail. Each entry counts on its own.
//   point  := "execute"   a program run: its MLX evaluation throws, as an MLX exception would
//           | "alloc"     a device allocation (a host-to-device transfer, or a run's outputs)
//                         fails as out of memory
//           | "callback"  a host callback fails as if its Python function had raised
//           | "kernel"    a run's kernels fail on MLX's stream after the worker handed them over,
//                         as a kernel that throws there would (only runs that complete on MLX's
//                         stream count: MLX's CPU device without graph compilation or host
//                         callbacks; the others evaluate on the worker, see "execute")
// An empty spec turns injection off. Lives in base/ because both lower/ (host callbacks) and
// runtime/ (runs, transfers) hook into it.
//
// Thread-safe. When no spec is installed a hook costs one atomic load.
#pragma once

#include <stdint.h>

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace jaxmlx::fault {

enum class Point { kExecute, kAlloc, kCallback, kKernel };

// Installs `spec`, replacing the one in force and restarting every count. INVALID_ARGUMENT naming
// the text when it does not parse; the previous spec then stays.
Status install(std::string_view spec);

// Installs $JAXMLX_FAULT when it is set (a client calls this when it starts).
Status install_from_env();

// The spec in force, as installed ("" when none).
std::string current();

// Counts one event at `point`. When the spec makes this event fail, returns what to say about
// it: "fault injected by JAXMLX_FAULT=execute:3 (execute #3)".
std::optional<std::string> fired(Point point);

// A program run: counts one allocation of its outputs, then one execution, and throws the
// std::runtime_error MLX would throw for the first that fires ("[malloc] Unable to allocate ..."
// for an allocation, which the memory governor reports as RESOURCE_EXHAUSTED).
void on_run();

}  // namespace jaxmlx::fault

extern "C" {
// Installs `spec` (NULL or "" turns injection off). Returns 0, or 1 and a NUL-terminated message
// in `error` (at most `error_capacity` bytes) when the spec does not parse. Exported from the
// plugin library for tests (python/jax_plugins/mlx/faults.py).
int32_t jaxmlx_set_fault(const char* spec, char* error, int64_t error_capacity);
}
