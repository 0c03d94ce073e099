// The lowering interface: how one IR op becomes MLX arrays.
//
// Every rule has one signature:
//
//   StatusOr<Values> lower_x(LowerContext& ctx, const ir::Op& op, const Values& in);
//
// `in` holds the op's operands as MLX arrays (in operand order; types MLX lacks are in their
// storage form, see dtypes.h); the rule returns one array per op result, with the result's
// storage dtype and shape. Rules build lazy MLX graphs: they never call mx::eval (the executor
// decides when to evaluate), never touch host memory, and never throw on purpose — a case a rule
// cannot handle returns ctx.unsupported(op, "reason"), which names the op and the user's source
// line. MLX exceptions are caught by the executor and turned into errors naming the op.
//
// Rules run on the device worker thread (the only thread that touches MLX), once while an
// executable is traced and possibly again on later calls. They must be deterministic functions
// of (op, input shapes/dtypes) apart from the input values.
//
// Registration: each lower/<family>.cc ends with `void register_<family>(Registry& r)` adding its
// rules; registry.cc calls them all. One op family per file.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ir/module.h"
#include "mlx/array.h"

namespace jaxmlx::lower {

namespace mx = mlx::core;
using Values = std::vector<mx::array>;

class LowerContext {
 public:
  virtual ~LowerContext() = default;

  // Evaluates `region` (a reduce/sort/scatter body, a while cond/body, a case branch) on `args`
  // and returns what its terminator returns. Bodies are traced, not evaluated: the results are
  // lazy arrays, so calling a scalar body on whole arrays applies it elementwise.
  virtual StatusOr<Values> call_region(const ir::Region& region, const Values& args) = 0;

  // Calls a function of the module by name (func.call).
  virtual StatusOr<Values> call_func(std::string_view name, const Values& args) = 0;

  // Forces `arrays` to be computed and returns when they are (only control flow that must read
  // a value on the host — a data-dependent while condition or case index — should need this).
  virtual Status eval(const Values& arrays) = 0;

  // The module being lowered (for func lookups, types).
  virtual const ir::Module& module() const = 0;

  // UNIMPLEMENTED naming the op, what blocks it and its source location:
  //   "stablehlo.fft (fft_type=IRFFT, f64) at jit(f)/irfft  model.py:42:7"
  Status unsupported(const ir::Op& op, const std::string& reason) const;
  // INVALID_ARGUMENT for a malformed op (wrong operand count, bad attribute).
  Status malformed(const ir::Op& op, const std::string& reason) const;
};

using LowerFn = std::function<StatusOr<Values>(LowerContext&, const ir::Op&, const Values&)>;

class Registry {
 public:
  void add(ir::OpKind kind, LowerFn fn);
  // Null when no rule lowers `kind`.
  const LowerFn* find(ir::OpKind kind) const;

  // stablehlo.custom_call targets, by call_target_name: a family that implements a target (Qr,
  // a host callback, ...) registers it here from its own file; custom_call.cc dispatches.
  void add_custom_call(std::string target, LowerFn fn);
  const LowerFn* find_custom_call(std::string_view target) const;

  // The registry with every family's rules.
  static const Registry& global();

 private:
  std::vector<LowerFn> rules_ = std::vector<LowerFn>(static_cast<size_t>(ir::kNumOpKinds));
  std::map<std::string, LowerFn, std::less<>> custom_calls_;
};

// Each family's registration (one per lower/<family>.cc). Add new families to registry.cc.
void register_elementwise(Registry& r);   // elementwise.cc: arithmetic, math, compare, select...
void register_convert(Registry& r);       // convert.cc: convert, bitcast_convert
void register_shape(Registry& r);         // shape.cc: constant, iota, reshape, slices, pad...
void register_reduce(Registry& r);        // reduce.cc: reduce (any body)
void register_dot(Registry& r);           // dot.cc: dot, dot_general
void register_control_flow(Registry& r);  // control_flow.cc: while, case, if, call, ...
void register_rng(Registry& r);           // rng.cc: rng_bit_generator, rng
void register_custom_call(Registry& r);   // custom_call.cc: the custom calls jax emits
void register_fma(Registry& r);            // fma.cc: jaxmlx.fma/fms/fnma (passes/contract_fma)
void register_shape_dynamic(Registry& r);  // shape_dynamic.cc: dynamic_pad, tuples, dims, ids
void register_batch_norm(Registry& r);     // batch_norm.cc: batch_norm_{training,inference,grad}
void register_sort(Registry& r);          // sort.cc: sort (any comparator), ApproxTopK
void register_convolution(Registry& r);   // convolution.cc: convolution
void register_window(Registry& r);        // window.cc: reduce_window, select_and_scatter
void register_linalg(Registry& r);        // linalg.cc: cholesky, triangular_solve, Qr, eigh, svd...
void register_gather(Registry& r);        // gather.cc, scatter.cc: gather, dynamic_gather, scatter
void register_host_callback(Registry& r);  // host_callback.cc: jaxmlx.host_callback (Python)
void register_collective(Registry& r);     // collective.cc: all_reduce, all_gather, ... (1 device)
void register_fft(Registry& r);          // fft.cc: fft (FFT, IFFT, RFFT, IRFFT)
void register_dce_sink(Registry& r);     // dce_sink.cc: jax's dce_sink custom call
void register_softmax(Registry& r);      // softmax.cc: jaxmlx.softmax (passes/softmax)
void register_norms(Registry& r);        // norms.cc: jaxmlx.layer_norm, jaxmlx.rms_norm (passes/norms)
void register_attention(Registry& r);    // attention.cc: jaxmlx.attention (passes/attention)

}  // namespace jaxmlx::lower
