// Host callbacks: jax.debug.print, jax.debug.callback, jax.pure_callback and
// jax.experimental.io_callback on the mlx platform.
//
// Design. jax lowers these primitives through emit_python_callback, which only knows the
// platforms with XLA's Python-callback runtime (cpu, cuda, rocm, tpu). So:
//  1. python/jax_plugins/mlx/callbacks.py registers lowering rules for the callback primitives
//     on our platform. Each rule keeps the Python callable in a registry under an integer id and
//     emits
//         stablehlo.custom_call @jaxmlx.host_callback(%token?, %args...) {backend_config = "<id>"}
//     whose operand/result types are the callback's (plus a leading !stablehlo.token for ordered
//     effects: io_callback(ordered=True), ordered debug.print/callback). As jax does for CPU, the
//     registry entry lives as long as the compiled executable: the rule adds it to the lowering's
//     keepalive list, and the registry holds only a weak reference.
//  2. The plugin exports jaxmlx_set_host_callback_handler (host_callback.h); Python installs one
//     ctypes CFUNCTYPE trampoline through it (it takes the GIL only while it runs).
//  3. At run time this rule (on the device worker, kExecute mode) evaluates the operands, hands
//     their host bytes to the handler with preallocated result buffers, and adopts the filled
//     buffers as MLX arrays. The handler re-checks what the Python function returned (count,
//     dtype, shape) and turns a Python exception into an error naming the callback; the rule
//     turns that into the run's error status (never a crash), and later runs work as before.
// Ordering: the interpreter runs ops in program order and calls the handler synchronously, and
// one device worker runs executions one after another, so callbacks run in program order within
// and across executions; tokens only carry jax's ordering into the IR. A program with a callback
// is never replayed as a compiled graph (is_host_callback marks it as not straight-line; loop
// regions containing custom calls are interpreted), so the callback runs on every execution.
// At compile time (kTrial) the rule returns zeros and never calls Python. jaxlib compiles with
// the GIL held, and compiling checks the program on the worker: while a callback waits for the
// GIL there, the executable defers that check (host_callback_running) instead of deadlocking.
// A callback must not wait for results of the mlx device: the worker is busy running it.
#include "lower/host_callback.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "base/fault_injection.h"
#include "lower/dtypes.h"
#include "lower/interpreter.h"
#include "lower/lowering.h"
#include "mlx/ops.h"
#include "mlx/transforms.h"

namespace {
std::atomic<JaxmlxHostCallbackHandler> g_handler{nullptr};
std::atomic<int> g_running{0};  // host callbacks in progress
std::atomic<int> g_pending{0};  // runs of programs with host callbacks, queued or running
}  // namespace

extern "C" __attribute__((visibility("default"))) void jaxmlx_set_host_callback_handler(
    JaxmlxHostCallbackHandler handler) {
  g_handler.store(handler);
}

extern "C" __attribute__((visibility("default"))) int32_t jaxmlx_host_callbacks_running() {
  return g_running.load() + g_pending.load();
}

namespace jaxmlx::lower {

bool host_callback_running() { return g_running.load() > 0; }

PendingHostCallbackRun::PendingHostCallbackRun() { g_pending.fetch_add(1); }
PendingHostCallbackRun::~PendingHostCallbackRun() { g_pending.fetch_sub(1); }

bool is_host_callback(const ir::Op& op) {
  return op.kind == ir::OpKind::kCustomCall &&
         op.get_string("call_target_name") == kHostCallbackTarget;
}

namespace {

// A callback operand or result that carries data (tokens only order the call).
struct HostArray {
  size_t index;  // operand / result index
  mx::Dtype dtype;
  mx::Shape shape;  // storage shape (c128 has a trailing 2)
  std::vector<int64_t> dims;
  std::string dtype_name;
};

StatusOr<std::vector<HostArray>> host_arrays(const LowerContext& ctx, const ir::Op& op,
                                             const std::vector<ir::Value>& values,
                                             const char* what) {
  std::vector<HostArray> out;
  for (size_t i = 0; i < values.size(); ++i) {
    const ir::Type& t = *values[i].type;
    if (t.is_token()) continue;
    std::optional<mx::Dtype> dt = storage_dtype(t.dtype);
    if (!dt || !t.ranked || t.has_dynamic_dims())
      return ctx.unsupported(op, std::string("host callback ") + what + " of type " +
                                     ir::type_to_string(t));
    HostArray a{i, *dt, {}, t.dims, std::string(ir::element_type_name(t.dtype))};
    for (int64_t d : t.dims) a.shape.push_back(static_cast<int>(d));
    if (int extra = storage_trailing_dim(t.dtype)) a.shape.push_back(extra);
    out.push_back(std::move(a));
  }
  return out;
}

StatusOr<uint64_t> callback_id(const LowerContext& ctx, const ir::Op& op) {
  std::string_view s = op.get_string("backend_config");
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return ctx.malformed(op, "host callback without a callback id in backend_config");
  return id;
}

JaxmlxHostBuffer describe(void* data, int64_t nbytes, const HostArray& a) {
  return JaxmlxHostBuffer{data, nbytes, a.dtype_name.c_str(), a.dims.data(),
                          static_cast<int64_t>(a.dims.size())};
}

// Result buffers the handler fills, freed unless adopted by an MLX array.
struct ResultBuffers {
  std::vector<void*> data;
  ~ResultBuffers() {
    for (void* p : data) std::free(p);
  }
};

// Runs the Python function on the evaluated operands and returns its results, in op order.
StatusOr<Values> call_host(const ir::Op& op, uint64_t id,
                           const std::vector<HostArray>& args, const Values& arg_arrays,
                           const std::vector<HostArray>& results) {
  JaxmlxHostCallbackHandler handler = g_handler.load();
  if (handler == nullptr)
    return failed_precondition(
        "host callback: no handler is installed (the jax_plugins.mlx Python package installs it)");
  std::vector<JaxmlxHostBuffer> in;
  for (size_t i = 0; i < args.size(); ++i) {
    void* data = const_cast<uint8_t*>(arg_arrays[i].data<uint8_t>());  // the handler only reads
    in.push_back(describe(data, static_cast<int64_t>(arg_arrays[i].nbytes()), args[i]));
  }
  ResultBuffers bufs;
  std::vector<JaxmlxHostBuffer> out;
  for (const HostArray& r : results) {
    size_t n = mx::size_of(r.dtype);
    for (int d : r.shape) n *= static_cast<size_t>(d);
    void* p = std::malloc(n > 0 ? n : 1);
    if (p == nullptr)
      return resource_exhausted("host callback: cannot allocate " + std::to_string(n) + " bytes");
    bufs.data.push_back(p);
    out.push_back(describe(p, static_cast<int64_t>(n), r));
  }
  std::string error(4096, '\0');
  int32_t rc = 1;
  // JAXMLX_FAULT=callback:N fails the call as if the Python function had raised.
  if (std::optional<std::string> injected = fault::fired(fault::Point::kCallback)) {
    error = "host callback #" + std::to_string(id) + " failed: " + *injected;
  } else {
    g_running.fetch_add(1);
    rc = handler(id, in.data(), static_cast<int64_t>(in.size()), out.data(),
                 static_cast<int64_t>(out.size()), error.data(),
                 static_cast<int64_t>(error.size()));
    g_running.fetch_sub(1);
  }
  if (rc != 0) {
    error.resize(std::min(error.find('\0'), error.size()));
    // The op's location is the user's callback line: say where the failing call is.
    std::string where = std::string(op.name()) + " @" + std::string(kHostCallbackTarget);
    if (op.loc && op.loc->known()) where += " at " + op.loc->to_string();
    return failed_precondition(where + ": " +
                               (error.empty() ? "the host callback failed" : error));
  }
  Values made;
  for (size_t i = 0; i < results.size(); ++i) {
    made.push_back(mx::array(bufs.data[i], results[i].shape, results[i].dtype, std::free));
    bufs.data[i] = nullptr;  // adopted
  }
  return made;
}

StatusOr<Values> lower_host_callback(LowerContext& ctx, const ir::Op& op, const Values& in) {
  ASSIGN_OR_RETURN(uint64_t id, callback_id(ctx, op));
  ASSIGN_OR_RETURN(std::vector<HostArray> args, host_arrays(ctx, op, op.operands, "operand"));
  ASSIGN_OR_RETURN(std::vector<HostArray> results, host_arrays(ctx, op, op.results, "result"));
  auto* interp = dynamic_cast<Interpreter*>(&ctx);
  RunMode mode = interp ? interp->mode() : RunMode::kExecute;
  if (mode == RunMode::kTrace)
    return ctx.unsupported(op, "host callback inside a compiled trace");

  Values computed;
  if (mode == RunMode::kTrial) {  // compile-time check: never call Python
    for (const HostArray& r : results) computed.push_back(mx::zeros(r.shape, r.dtype));
  } else {
    Values arg_arrays;
    for (const HostArray& a : args) arg_arrays.push_back(mx::contiguous(in[a.index]));
    RETURN_IF_ERROR(ctx.eval(arg_arrays));
    ASSIGN_OR_RETURN(computed, call_host(op, id, args, arg_arrays, results));
  }
  Values out(op.results.size(), mx::array(false));  // tokens: a placeholder bool
  for (size_t i = 0; i < results.size(); ++i) out[results[i].index] = computed[i];
  return out;
}

}  // namespace

void register_host_callback(Registry& r) {
  r.add_custom_call(std::string(kHostCallbackTarget), lower_host_callback);
}

}  // namespace jaxmlx::lower
