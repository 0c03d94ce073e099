// Compiled with -ffp-contract=off -fwrapv (CMakeLists.txt): each instruction rounds as the MLX
// primitive it replaces does, and int32 arithmetic wraps as MLX's kernels do in practice.
#include "runtime/fused_elementwise.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "lower/fma.h"
#include "mlx/allocator.h"
#include "mlx/backend/cpu/binary_ops.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/backend/cpu/unary_ops.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

constexpr int kChunk = 256;  // elements per register: a chain's registers stay in L1/L2

using Kernel = FusedKernel;

// The instruction shapes, as class templates (the families below pick among them).
template <typename T, typename Op, typename Out = T>
struct Binary {
  static void run(const void* const* a, void* d, int n) {
    const T* x = static_cast<const T*>(a[0]);
    const T* y = static_cast<const T*>(a[1]);
    Out* o = static_cast<Out*>(d);
    Op op;
    for (int k = 0; k < n; ++k) o[k] = op(x[k], y[k]);
  }
};

template <typename T, typename Op>
using Compare = Binary<T, Op, bool>;

template <typename T, typename Op>
struct Unary {
  static void run(const void* const* a, void* d, int n) {
    const T* x = static_cast<const T*>(a[0]);
    T* o = static_cast<T*>(d);
    Op op;
    for (int k = 0; k < n; ++k) o[k] = op(x[k]);
  }
};

// a*b + c rounded once, as the Fma primitive (lower/fma.h) computes it.
void fma(const void* const* a, void* d, int n) {
  lower::fma_loop(static_cast<const float*>(a[0]), static_cast<const float*>(a[1]),
                  static_cast<const float*>(a[2]), static_cast<float*>(d), static_cast<size_t>(n));
}

// Picks bit patterns (as MLX's Select: no arithmetic on the values), over same-size unsigned
// integers so that the loop vectorizes for floats too.
template <typename T>
void select(const void* const* a, void* d, int n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint8_t>;
  const uint8_t* c = static_cast<const uint8_t*>(a[0]);
  const Bits* x = static_cast<const Bits*>(a[1]);
  const Bits* y = static_cast<const Bits*>(a[2]);
  Bits* o = static_cast<Bits*>(d);
  for (int k = 0; k < n; ++k) o[k] = c[k] ? x[k] : y[k];
}

// XLA's shifts: an amount of the width or more (as unsigned) shifts everything out; the
// arithmetic right shift of a signed type fills with the sign. MLX's kernels compute `x << y`
// there, which C++ leaves undefined; our lowering never reads those lanes (it selects XLA's
// result for them, lower/elementwise_int.cc), so any defined value matches what it returns.
struct ShiftLeft {
  template <typename T>
  T operator()(T x, T y) const {
    using U = std::make_unsigned_t<T>;
    return static_cast<U>(y) >= sizeof(T) * 8 ? T(0) : static_cast<T>(static_cast<U>(x) << y);
  }
};
struct ShiftRight {
  template <typename T>
  T operator()(T x, T y) const {
    using U = std::make_unsigned_t<T>;
    if (static_cast<U>(y) >= sizeof(T) * 8) return std::is_signed_v<T> && x < 0 ? T(-1) : T(0);
    return x >> y;  // arithmetic for a signed T (C++20), as MLX's operator>>
  }
};

// A shift whose amount is one value over the chunk (threefry's rotations: constants) shifts by a
// scalar, which vectorizes on any x86-64 (a per-lane variable shift needs AVX2); other amounts go
// element by element. Same values either way.
template <typename T, typename Op>
struct Shift {
  static void run(const void* const* a, void* d, int n) {
    const T* x = static_cast<const T*>(a[0]);
    const T* y = static_cast<const T*>(a[1]);
    T* o = static_cast<T*>(d);
    Op op;
    using U = std::make_unsigned_t<T>;
    U differs = 0;  // an or of xors: a reduction that vectorizes
    for (int k = 1; k < n; ++k) differs |= static_cast<U>(y[k]) ^ static_cast<U>(y[0]);
    if (differs != 0) {
      for (int k = 0; k < n; ++k) o[k] = op(x[k], y[k]);
      return;
    }
    const U s = static_cast<U>(y[0]);
    if (s >= sizeof(T) * 8) {
      for (int k = 0; k < n; ++k) o[k] = op(x[k], y[0]);
    } else if constexpr (std::is_same_v<Op, ShiftLeft>) {
      for (int k = 0; k < n; ++k) o[k] = static_cast<T>(static_cast<U>(x[k]) << s);
    } else {
      for (int k = 0; k < n; ++k) o[k] = static_cast<T>(x[k] >> s);
    }
  }
};

// Bools are stored as bytes 0 or 1: and, or and not as byte arithmetic give the same bytes as
// MLX's bool functors and vectorize.
template <int kOp>
void bool_bytes(const void* const* a, void* d, int n) {
  const uint8_t* x = static_cast<const uint8_t*>(a[0]);
  const uint8_t* y = static_cast<const uint8_t*>(a[kOp == 2 ? 0 : 1]);
  uint8_t* o = static_cast<uint8_t*>(d);
  for (int k = 0; k < n; ++k) o[k] = kOp == 0 ? (x[k] & y[k]) : kOp == 1 ? (x[k] | y[k]) : (x[k] ^ 1);
}

// A View between 4-byte dtypes: the same bits.
void same_bits(const void* const* a, void* d, int n) {
  std::memcpy(d, a[0], static_cast<size_t>(n) * 4);
}

template <typename In, typename Out>
void astype(const void* const* a, void* d, int n) {
  const In* x = static_cast<const In*>(a[0]);
  Out* o = static_cast<Out*>(d);
  for (int k = 0; k < n; ++k) o[k] = static_cast<Out>(x[k]);  // as MLX's copy kernels convert
}

enum class Kind { kF32, kI32, kU32, kBool, kOther };

Kind kind_of(mx::Dtype d) {
  switch (d.val()) {
    case mx::Dtype::Val::float32: return Kind::kF32;
    case mx::Dtype::Val::int32: return Kind::kI32;
    case mx::Dtype::Val::uint32: return Kind::kU32;
    case mx::Dtype::Val::bool_: return Kind::kBool;
    default: return Kind::kOther;
  }
}

// The kernel of each family for operand kind `k`; nullptr for kinds outside the family (never
// asked for: FusedProgram::supports admits the same combinations).
template <template <typename, typename> class K, typename Op>
Kernel numbers(Kind k) {
  switch (k) {
    case Kind::kF32: return &K<float, Op>::run;
    case Kind::kI32: return &K<int32_t, Op>::run;
    case Kind::kU32: return &K<uint32_t, Op>::run;
    default: return nullptr;
  }
}

template <template <typename, typename> class K, typename Op>
Kernel floats(Kind k) {
  return k == Kind::kF32 ? &K<float, Op>::run : nullptr;
}

template <template <typename, typename> class K, typename Op>
Kernel bits(Kind k) {
  switch (k) {
    case Kind::kI32: return &K<int32_t, Op>::run;
    case Kind::kU32: return &K<uint32_t, Op>::run;
    case Kind::kBool: return &K<bool, Op>::run;
    default: return nullptr;
  }
}

template <template <typename, typename> class K, typename Op>
Kernel ints(Kind k) {
  switch (k) {
    case Kind::kI32: return &K<int32_t, Op>::run;
    case Kind::kU32: return &K<uint32_t, Op>::run;
    default: return nullptr;
  }
}

template <typename In>
Kernel conversion_to(Kind out) {
  switch (out) {
    case Kind::kF32: return &astype<In, float>;
    case Kind::kI32: return &astype<In, int32_t>;
    case Kind::kU32: return &astype<In, uint32_t>;
    case Kind::kBool: return &astype<In, bool>;
    default: return nullptr;
  }
}

Kernel conversion(Kind in, Kind out) {
  switch (in) {
    case Kind::kF32: return conversion_to<float>(out);
    case Kind::kI32: return conversion_to<int32_t>(out);
    case Kind::kU32: return conversion_to<uint32_t>(out);
    case Kind::kBool: return conversion_to<bool>(out);
    default: return nullptr;
  }
}

Kernel selection(Kind k) {
  switch (k) {
    case Kind::kF32: return &select<float>;
    case Kind::kI32: return &select<int32_t>;
    case Kind::kU32: return &select<uint32_t>;
    case Kind::kBool: return &select<bool>;
    default: return nullptr;
  }
}

Kernel kernel_for(const FusedInstr& ins) {
  namespace d = mx::detail;
  const Kind k = kind_of(ins.arg_dtype);
  switch (ins.op) {
    case FusedOp::kAdd: return numbers<Binary, d::Add>(k);
    case FusedOp::kSubtract: return numbers<Binary, d::Subtract>(k);
    case FusedOp::kMultiply: return numbers<Binary, d::Multiply>(k);
    case FusedOp::kDivide: return floats<Binary, d::Divide>(k);
    case FusedOp::kMaximum: return numbers<Binary, d::Maximum>(k);
    case FusedOp::kMinimum: return numbers<Binary, d::Minimum>(k);
    case FusedOp::kPower: return floats<Binary, d::Power>(k);
    case FusedOp::kLogicalAnd: return k == Kind::kBool ? &bool_bytes<0> : nullptr;
    case FusedOp::kLogicalOr: return k == Kind::kBool ? &bool_bytes<1> : nullptr;
    case FusedOp::kBitwiseAnd: return bits<Binary, d::BitwiseAnd>(k);
    case FusedOp::kBitwiseOr: return bits<Binary, d::BitwiseOr>(k);
    case FusedOp::kBitwiseXor: return bits<Binary, d::BitwiseXor>(k);
    case FusedOp::kLeftShift: return ints<Shift, ShiftLeft>(k);
    case FusedOp::kRightShift: return ints<Shift, ShiftRight>(k);
    case FusedOp::kView: return &same_bits;
    case FusedOp::kNegative: return numbers<Unary, d::Negative>(k);
    case FusedOp::kAbs:
      return k == Kind::kI32 ? &Unary<int32_t, d::Abs>::run : floats<Unary, d::Abs>(k);
    case FusedOp::kSqrt: return floats<Unary, d::Sqrt>(k);
    case FusedOp::kRsqrt: return floats<Unary, d::Rsqrt>(k);
    case FusedOp::kExp: return floats<Unary, d::Exp>(k);
    case FusedOp::kLog: return floats<Unary, d::Log>(k);
    case FusedOp::kTanh: return floats<Unary, d::Tanh>(k);
    case FusedOp::kSigmoid: return floats<Unary, d::Sigmoid>(k);
    case FusedOp::kSquare: return numbers<Unary, d::Square>(k);
    case FusedOp::kLogicalNot: return k == Kind::kBool ? &bool_bytes<2> : nullptr;
    case FusedOp::kEqual:
      return k == Kind::kBool ? &Compare<bool, d::Equal>::run : numbers<Compare, d::Equal>(k);
    case FusedOp::kNotEqual:
      return k == Kind::kBool ? &Compare<bool, d::NotEqual>::run : numbers<Compare, d::NotEqual>(k);
    case FusedOp::kLess: return numbers<Compare, d::Less>(k);
    case FusedOp::kLessEqual: return numbers<Compare, d::LessEqual>(k);
    case FusedOp::kGreater: return numbers<Compare, d::Greater>(k);
    case FusedOp::kGreaterEqual: return numbers<Compare, d::GreaterEqual>(k);
    case FusedOp::kSelect: return selection(kind_of(ins.dtype));
    case FusedOp::kFma: return k == Kind::kF32 ? &fma : nullptr;
    case FusedOp::kAsType: return conversion(k, kind_of(ins.dtype));
  }
  return nullptr;
}

// How one input is read for a chunk of the output.
struct Source {
  enum class Mode { kDirect, kSplat, kStrided } mode = Mode::kDirect;
  const char* base = nullptr;
  int elem = 4;                  // bytes per element
  mx::Strides strides;           // per output dim, in elements; 0 where broadcast (inline: no
                                 // allocation per input per run)
};

// `in` broadcast numpy-style (trailing dims aligned) to `shape`: the fusion pass admits only
// inputs whose dims past their leading 1s align so (cpu_fusion.cc, broadcasts_to).
Source source_for(const mx::array& in, const mx::Shape& shape) {
  Source s;
  s.base = in.data<char>();
  s.elem = static_cast<int>(in.itemsize());
  // Leading size-1 dims mean nothing to the alignment (an input may have more of them).
  const int nd = static_cast<int>(shape.size()), r = static_cast<int>(in.ndim());
  int lead = 0;
  while (lead < r && in.shape(lead) == 1) ++lead;
  s.strides = mx::Strides(nd, 0);
  bool all_zero = true, row_major = true;
  int64_t expect = 1;
  for (int d = nd - 1; d >= 0; --d) {
    const int j = d - (nd - r);
    if (j >= lead && in.shape(j) != 1) s.strides[d] = in.strides()[j];
    all_zero = all_zero && s.strides[d] == 0;
    if (shape[d] != 1 && s.strides[d] != expect) row_major = false;
    expect *= shape[d];
  }
  s.mode = all_zero ? Source::Mode::kSplat : row_major ? Source::Mode::kDirect
                                                      : Source::Mode::kStrided;
  // Size-1 dims move no offset: gather walks the shape without them (run_program's `walked`; a
  // trailing one would make every row segment a single element).
  size_t kept = 0;
  for (int d = 0; d < nd; ++d)
    if (shape[d] != 1) s.strides[kept++] = s.strides[d];
  s.strides.resize(kept);
  return s;
}

// Copies output elements [start, start + n) of source `s` into `out`, a row segment at a time.
template <typename E>
void gather(const Source& s, const mx::Shape& shape, int64_t start, int n, void* out) {
  const E* base = reinterpret_cast<const E*>(s.base);
  E* dst = static_cast<E*>(out);
  const int nd = static_cast<int>(shape.size());
  mx::Strides idx(nd);  // inline storage: gathered once per chunk
  int64_t rem = start, off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    off += idx[d] * s.strides[d];
  }
  const int last = nd - 1;
  const int64_t step = s.strides[last];
  for (int k = 0; k < n;) {
    const int seg = static_cast<int>(std::min<int64_t>(shape[last] - idx[last], n - k));
    if (step == 1) {
      std::memcpy(dst + k, base + off, seg * sizeof(E));
    } else if (step == 0) {
      std::fill(dst + k, dst + k + seg, base[off]);
    } else {
      for (int q = 0; q < seg; ++q) dst[k + q] = base[off + q * step];
    }
    k += seg;
    idx[last] += seg;
    off += seg * step;
    for (int d = last; d > 0 && idx[d] == shape[d]; --d) {  // carry into the outer dims
      off += s.strides[d - 1] - s.strides[d] * shape[d];
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

// Inputs are bool (1 byte) or 4-byte numbers: FusedProgram::supports admits no other dtype.
void gather_any(const Source& s, const mx::Shape& shape, int64_t start, int n, void* out) {
  if (s.elem == 1) return gather<uint8_t>(s, shape, start, n, out);
  gather<uint32_t>(s, shape, start, n, out);
}

}  // namespace

// Scratch slots: one per input (splat and strided inputs are gathered into theirs), then one per
// instruction result that is not a primitive result, reused once its last reader has run (a
// result never shares a slot with its own operands: conversions change the element size). Long
// chains keep a working set of a few slots per chunk instead of one per instruction.
struct FusedElementwise::Plan {
  std::vector<FusedKernel> kernels;  // one per instruction
  std::vector<int> slot;             // per register: its scratch slot, -1 for a primitive result
  std::vector<int> out_of;           // per instruction: its result index, -1 for none
  int num_slots = 0;

  explicit Plan(const FusedProgram& p) {
    const int n = static_cast<int>(p.code.size());
    for (const FusedInstr& ins : p.code) kernels.push_back(kernel_for(ins));
    out_of.assign(n, -1);
    if (p.outputs.empty()) out_of.back() = 0;
    for (size_t k = 0; k < p.outputs.size(); ++k)
      out_of[p.outputs[k] - p.num_inputs] = static_cast<int>(k);
    std::vector<int> last_read(p.num_inputs + n, -1);
    for (int j = 0; j < n; ++j)
      for (int a : p.code[j].args) last_read[a] = j;
    slot.assign(p.num_inputs + n, -1);
    for (int i = 0; i < p.num_inputs; ++i) slot[i] = i;
    num_slots = p.num_inputs;
    std::vector<int> free;
    for (int j = 0; j < n; ++j) {
      const int r = p.num_inputs + j;
      if (out_of[j] < 0) {
        if (free.empty()) free.push_back(num_slots++);
        slot[r] = free.back();
        free.pop_back();
      }
      for (int a : p.code[j].args)  // operands read for the last time give their slots back
        if (a >= p.num_inputs && last_read[a] == j && slot[a] >= 0 &&
            std::find(free.begin(), free.end(), slot[a]) == free.end())
          free.push_back(slot[a]);
      if (last_read[r] < 0 && slot[r] >= 0) free.push_back(slot[r]);  // never read
    }
  }
};

namespace {

// What one run reads and writes, worked out when MLX evaluates the primitive (its buffers exist
// by then: MLX's CPU ops allocate their outputs as they are evaluated) so that the task on the
// stream holds plain pointers, not a weak copy of every input and result (each one more MLX
// array: in a tiny MLP's training step, 185 of the 311 arrays a run made).
struct Operands {
  struct Result {
    char* data;  // its first element
    int elem;    // bytes per element
  };
  std::vector<Source> in;
  std::vector<Result> out;
  mx::Shape walked;   // the output shape without its size-1 dims (what gather() steps)
  int64_t total = 0;  // output elements
};

Operands operands_for(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  Operands ops;
  const mx::Shape& shape = outputs[0].shape();
  ops.total = static_cast<int64_t>(outputs[0].size());
  for (int d : shape)
    if (d != 1) ops.walked.push_back(d);
  ops.in.reserve(inputs.size());
  for (const mx::array& in : inputs) ops.in.push_back(source_for(in, shape));
  ops.out.reserve(outputs.size());
  for (mx::array& o : outputs) ops.out.push_back({o.data<char>(), static_cast<int>(o.itemsize())});
  return ops;
}

void run_program(const FusedProgram& p, const FusedElementwise::Plan& plan, const Operands& ops) {
  const int64_t total = ops.total;
  const int nregs = p.num_inputs + static_cast<int>(p.code.size());
  const int chunk = static_cast<int>(std::min<int64_t>(kChunk, total));
  // Slots of `chunk` elements of up to 4 bytes (uint32_t keeps them aligned for any type), kept
  // by MLX's stream thread from run to run (no allocation each).
  thread_local std::vector<uint32_t> scratch;
  thread_local std::vector<const void*> ptr;
  scratch.resize(std::max(scratch.size(), static_cast<size_t>(plan.num_slots) * chunk));
  auto slot = [&](int s) -> void* { return scratch.data() + static_cast<size_t>(s) * chunk; };
  for (int i = 0; i < p.num_inputs; ++i) {
    const Source& s = ops.in[i];
    if (s.mode == Source::Mode::kSplat) {  // one element, repeated once for every chunk
      char* dst = static_cast<char*>(slot(i));
      for (int k = 0; k < chunk; ++k) std::memcpy(dst + k * s.elem, s.base, s.elem);
    }
  }
  ptr.assign(nregs, nullptr);
  const void* args[3];
  for (int64_t start = 0; start < total; start += chunk) {
    const int n = static_cast<int>(std::min<int64_t>(chunk, total - start));
    for (int i = 0; i < p.num_inputs; ++i) {
      const Source& s = ops.in[i];
      switch (s.mode) {
        case Source::Mode::kDirect: ptr[i] = s.base + start * s.elem; break;
        case Source::Mode::kSplat: ptr[i] = slot(i); break;
        case Source::Mode::kStrided:
          gather_any(s, ops.walked, start, n, slot(i));
          ptr[i] = slot(i);
          break;
      }
    }
    for (int j = 0; j < static_cast<int>(p.code.size()); ++j) {
      const FusedInstr& ins = p.code[j];
      for (size_t a = 0; a < ins.args.size(); ++a) args[a] = ptr[ins.args[a]];
      const int o = plan.out_of[j];
      void* dst = o < 0 ? slot(plan.slot[p.num_inputs + j]) : ops.out[o].data + start * ops.out[o].elem;
      plan.kernels[j](args, dst, n);
      ptr[p.num_inputs + j] = dst;
    }
  }
}

}  // namespace

const char* fused_op_name(FusedOp op) {
  switch (op) {
    case FusedOp::kAdd: return "Add";
    case FusedOp::kSubtract: return "Subtract";
    case FusedOp::kMultiply: return "Multiply";
    case FusedOp::kDivide: return "Divide";
    case FusedOp::kMaximum: return "Maximum";
    case FusedOp::kMinimum: return "Minimum";
    case FusedOp::kPower: return "Power";
    case FusedOp::kLogicalAnd: return "LogicalAnd";
    case FusedOp::kLogicalOr: return "LogicalOr";
    case FusedOp::kBitwiseAnd: return "BitwiseAnd";
    case FusedOp::kBitwiseOr: return "BitwiseOr";
    case FusedOp::kBitwiseXor: return "BitwiseXor";
    case FusedOp::kLeftShift: return "LeftShift";
    case FusedOp::kRightShift: return "RightShift";
    case FusedOp::kView: return "View";
    case FusedOp::kNegative: return "Negative";
    case FusedOp::kAbs: return "Abs";
    case FusedOp::kSqrt: return "Sqrt";
    case FusedOp::kRsqrt: return "Rsqrt";
    case FusedOp::kExp: return "Exp";
    case FusedOp::kLog: return "Log";
    case FusedOp::kTanh: return "Tanh";
    case FusedOp::kSigmoid: return "Sigmoid";
    case FusedOp::kSquare: return "Square";
    case FusedOp::kLogicalNot: return "LogicalNot";
    case FusedOp::kEqual: return "Equal";
    case FusedOp::kNotEqual: return "NotEqual";
    case FusedOp::kLess: return "Less";
    case FusedOp::kLessEqual: return "LessEqual";
    case FusedOp::kGreater: return "Greater";
    case FusedOp::kGreaterEqual: return "GreaterEqual";
    case FusedOp::kSelect: return "Select";
    case FusedOp::kFma: return "Fma";
    case FusedOp::kAsType: return "AsType";
  }
  return "?";
}

bool FusedProgram::supports(FusedOp op, mx::Dtype arg, mx::Dtype out) {
  const Kind a = kind_of(arg), o = kind_of(out);
  if (a == Kind::kOther || o == Kind::kOther) return false;
  const bool number = a == Kind::kF32 || a == Kind::kI32 || a == Kind::kU32;
  switch (op) {
    case FusedOp::kAdd: case FusedOp::kSubtract: case FusedOp::kMultiply:
    case FusedOp::kMaximum: case FusedOp::kMinimum: case FusedOp::kSquare:
    case FusedOp::kNegative:
      return number && a == o;
    case FusedOp::kAbs: return (a == Kind::kF32 || a == Kind::kI32) && a == o;
    // Integer division by zero traps: left to MLX's own kernel.
    case FusedOp::kDivide: case FusedOp::kSqrt: case FusedOp::kRsqrt:
      return a == Kind::kF32 && o == Kind::kF32;
    // MLX's approximations, evaluated here one element at a time: the same bits as its kernels
    // only where those run one element at a time too (x86-64; Accelerate/NEON builds run them
    // over 8-wide vectors, which need not round alike).
    case FusedOp::kExp: case FusedOp::kLog: case FusedOp::kTanh: case FusedOp::kSigmoid:
    case FusedOp::kPower:
      return a == Kind::kF32 && o == Kind::kF32 && mx::simd::max_size<float> == 1;
    case FusedOp::kLogicalAnd: case FusedOp::kLogicalOr: case FusedOp::kLogicalNot:
      return a == Kind::kBool && o == Kind::kBool;
    case FusedOp::kBitwiseAnd: case FusedOp::kBitwiseOr: case FusedOp::kBitwiseXor:
      return a != Kind::kF32 && a == o;
    case FusedOp::kLeftShift: case FusedOp::kRightShift:
      return (a == Kind::kI32 || a == Kind::kU32) && a == o;
    case FusedOp::kView: return a != Kind::kBool && o != Kind::kBool;  // 4 bytes each
    case FusedOp::kEqual: case FusedOp::kNotEqual:
      return o == Kind::kBool;  // bools too
    case FusedOp::kLess:
    case FusedOp::kLessEqual: case FusedOp::kGreater: case FusedOp::kGreaterEqual:
      return number && o == Kind::kBool;
    case FusedOp::kSelect: return a == o;
    case FusedOp::kFma: return a == Kind::kF32 && o == Kind::kF32;
    case FusedOp::kAsType: return true;
  }
  return false;
}

FusedElementwise::FusedElementwise(mx::Stream stream, std::shared_ptr<const FusedProgram> program)
    : mx::Primitive(stream),
      program_(std::move(program)),
      plan_(std::make_shared<const Plan>(*program_)) {}

void FusedElementwise::eval_cpu(const std::vector<mx::array>& inputs,
                                std::vector<mx::array>& outputs) {
  // The last result (written by the last instruction, after every read of a chunk) may write
  // over an input MLX would let go of anyway, as its own elementwise kernels do: each element
  // is computed from the same element of a same-shaped contiguous input.
  mx::array& last = outputs.back();
  bool donated = false;
  for (const mx::array& in : inputs) {
    if (in.dtype() == last.dtype() && in.shape() == last.shape() && in.flags().row_contiguous &&
        in.data_size() == last.size() && in.is_donatable()) {
      last.copy_shared_buffer(in);
      donated = true;
      break;
    }
  }
  for (size_t k = 0; k < outputs.size(); ++k)
    if (k + 1 < outputs.size() || !donated) outputs[k].set_data(mx::allocator::malloc(outputs[k].nbytes()));
  if (last.size() == 0) return;
  auto& encoder = mx::cpu::get_command_encoder(stream());
  // MLX's cpu::eval keeps the inputs' and the other results' buffers alive until the stream has
  // run this task, and the graph holds the array evaluated: as for MLX's own CPU kernels, which
  // hold weak copies of their arrays.
  for (const mx::array& in : inputs) encoder.set_input_array(in);
  for (mx::array& o : outputs) encoder.set_output_array(o);
  encoder.dispatch([program = program_, plan = plan_, ops = operands_for(inputs, outputs)] {
    run_program(*program, *plan, ops);
  });
}

void FusedElementwise::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[FusedElementwise] runs on MLX's CPU only");
}

bool FusedElementwise::is_equivalent(const mx::Primitive& other) const {
  const auto* o = dynamic_cast<const FusedElementwise*>(&other);
  if (o == nullptr) return false;
  const FusedProgram& a = *program_;
  const FusedProgram& b = *o->program_;
  if (a.num_inputs != b.num_inputs || a.code.size() != b.code.size() || a.outputs != b.outputs)
    return false;
  for (size_t i = 0; i < a.code.size(); ++i) {
    const FusedInstr& x = a.code[i];
    const FusedInstr& y = b.code[i];
    if (x.op != y.op || x.dtype != y.dtype || x.arg_dtype != y.arg_dtype || x.args != y.args)
      return false;
  }
  return true;
}

}  // namespace jaxmlx::runtime
