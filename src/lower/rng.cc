// Lowering rules: rng family (see lowering.h for the rule contract).
//
// stablehlo.rng_bit_generator is bit-exact with XLA's CPU backend, which expands the op before
// code generation: DEFAULT means PHILOX there (the CPU pipeline's default algorithm), THREE_FRY
// is Threefry-2x32 with 20 rounds, PHILOX is Philox-4x32 with 10 rounds. The state is u64[n]:
// state[0] is the key; Threefry counts with state[1]; Philox counts with a 128-bit counter
// (low, high) = (state[1], state[0]) for u64[2] and (state[1], state[2]) for u64[3]. Outputs
// narrower than 32 bits are the low bits of 32-bit draws; 64-bit outputs join two 32-bit words.
// Everything is lazy MLX integer arithmetic (uint32 words, uint64 for counters and 32x32->64
// products).
//
// Also here: f32 log and log1p traced inside jax.random's samplers replay XLA:CPU's own
// polynomials (xla_cpu_log.h) so that normal, exponential, gumbel, ... draws are bit-exact with
// jax's CPU backend; this wraps elementwise.cc's rules, which stay as they are everywhere else.
#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "lower/dtypes.h"
#include "lower/lowering.h"
#include "lower/rng.h"
#include "lower/xla_cpu_log.h"
#include "passes/contract_fma.h"
#include "mlx/ops.h"

namespace jaxmlx::lower {
namespace {

using Words2 = std::array<mx::array, 2>;
using Words4 = std::array<mx::array, 4>;

mx::array u32(uint32_t v) { return mx::array(v, mx::uint32); }
mx::array u64(uint64_t v) { return mx::array(v, mx::uint64); }

mx::array low32(const mx::array& x) { return mx::astype(x, mx::uint32); }
mx::array high32(const mx::array& x) { return mx::astype(mx::right_shift(x, u64(32)), mx::uint32); }
mx::array join64(const mx::array& lo, const mx::array& hi) {
  return mx::bitwise_or(mx::astype(lo, mx::uint64),
                        mx::left_shift(mx::astype(hi, mx::uint64), u64(32)));
}

mx::array rotl32(const mx::array& v, int r) {
  return mx::bitwise_or(mx::left_shift(v, u32(r)), mx::right_shift(v, u32(32 - r)));
}

}  // namespace

// Threefry-2x32, 20 rounds (Salmon et al. 2011), as MLX ops.
std::array<mx::array, 2> threefry2x32_ops(mx::array x0, mx::array x1, const mx::array& k0,
                                      const mx::array& k1) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const mx::array ks[3] = {k0, k1, mx::bitwise_xor(mx::bitwise_xor(u32(0x1BD11BDA), k0), k1)};
  x0 = mx::add(x0, ks[0]);
  x1 = mx::add(x1, ks[1]);
  for (int block = 0; block < 5; ++block) {
    for (int r : kRot[block % 2]) {
      x0 = mx::add(x0, x1);
      x1 = mx::bitwise_xor(x0, rotl32(x1, r));
    }
    // Key injection after every 4 rounds, with the block number added to the second word.
    x0 = mx::add(x0, ks[(block + 1) % 3]);
    x1 = mx::add(mx::add(x1, ks[(block + 2) % 3]), u32(static_cast<uint32_t>(block + 1)));
  }
  return {x0, x1};
}

namespace {

// Philox-4x32, 10 rounds, on uint32 arrays (the key words are scalars).
Words4 philox4x32(Words4 x, mx::array k0, mx::array k1) {
  auto mul_hi_lo = [](const mx::array& a, uint64_t m) {
    mx::array p = mx::multiply(mx::astype(a, mx::uint64), u64(m));
    return Words2{high32(p), low32(p)};
  };
  for (int round = 0; round < 10; ++round) {
    Words2 p0 = mul_hi_lo(x[0], 0xD2511F53u);
    Words2 p1 = mul_hi_lo(x[2], 0xCD9E8D57u);
    x = Words4{mx::bitwise_xor(mx::bitwise_xor(p1[0], x[1]), k0), p1[1],
               mx::bitwise_xor(mx::bitwise_xor(p0[0], x[3]), k1), p0[1]};
    k0 = mx::add(k0, u32(0x9E3779B9u));
    k1 = mx::add(k1, u32(0xBB67AE85u));
  }
  return x;
}

mx::array element(const mx::array& v, int i) {
  return mx::reshape(mx::slice(v, {i}, {i + 1}), {});
}

mx::array counter(const mx::array& start, int64_t n) {
  return mx::add(start, mx::arange(0.0, static_cast<double>(n), 1.0, mx::uint64));
}

// Threefry 32-bit draws for `dims` as XLA lays them out: the first even dimension (else the
// largest) is split in halves of pairs; each counter yields the two words of one pair.
mx::array threefry_bits32(const mx::array& key, const mx::array& start,
                          const std::vector<int64_t>& dims, int64_t* used) {
  const mx::array k0 = low32(key), k1 = high32(key);
  if (dims.empty()) {
    *used = 1;
    return mx::reshape(threefry2x32(low32(start), high32(start), k0, k1)[0], {});
  }
  int split = -1;
  for (size_t i = 0; i < dims.size() && split < 0; ++i)
    if (dims[i] % 2 == 0) split = static_cast<int>(i);
  if (split < 0) {
    split = 0;
    for (size_t i = 1; i < dims.size(); ++i)
      if (dims[i] > dims[split]) split = static_cast<int>(i);
  }
  mx::Shape half, padded;
  int64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = static_cast<int>(i) == split ? (dims[i] + 1) / 2 : dims[i];
    half.push_back(static_cast<int>(d));
    if (static_cast<int>(i) == split) half.push_back(1);
    padded.push_back(static_cast<int>(static_cast<int>(i) == split ? 2 * d : d));
    n *= d;
  }
  *used = n;
  mx::array c = mx::reshape(counter(start, n), half);
  Words2 w = threefry2x32(low32(c), high32(c), k0, k1);
  mx::array out = mx::reshape(mx::concatenate({w[0], w[1]}, split + 1), padded);
  if (padded[split] != dims[split]) {
    mx::Shape stop = padded;
    stop[split] = static_cast<int>(dims[split]);
    out = mx::slice(out, mx::Shape(padded.size(), 0), stop);
  }
  return out;
}

mx::array threefry_bits64(const mx::array& key, const mx::array& start, int64_t n) {
  mx::array c = counter(start, n);
  Words2 w = threefry2x32(low32(c), high32(c), low32(key), high32(key));
  return join64(w[0], w[1]);
}

// Philox words for `n4` consecutive 128-bit counters from (low, high); returns the four
// words interleaved (word j of counter i at 4*i+j).
mx::array philox_words(const mx::array& key, const mx::array& low, const mx::array& high,
                       int64_t n4) {
  mx::array in_low = counter(low, n4);
  mx::array in_high = mx::where(mx::less(in_low, low), mx::add(high, u64(1)), high);
  Words4 w = philox4x32({low32(in_low), high32(in_low), low32(in_high), high32(in_high)},
                        low32(key), high32(key));
  return mx::reshape(mx::stack({w[0], w[1], w[2], w[3]}, 1), {static_cast<int>(4 * n4)});
}

mx::array philox_bits(const mx::array& key, const mx::array& low, const mx::array& high,
                      int64_t n, bool wide, int64_t* used) {
  const int64_t words = wide ? 2 * n : n;
  *used = (words + 3) / 4;
  mx::array w = philox_words(key, low, high, *used);
  if (wide) {
    mx::array pairs = mx::reshape(w, {static_cast<int>(2 * *used), 2});
    w = join64(mx::reshape(mx::slice(pairs, {0, 0}, {2 * static_cast<int>(*used), 1}), {-1}),
               mx::reshape(mx::slice(pairs, {0, 1}, {2 * static_cast<int>(*used), 2}), {-1}));
  }
  return mx::slice(w, {0}, {static_cast<int>(n)});
}

// The draws (uint32 or uint64) reinterpreted as the result type; narrow types keep low bits.
StatusOr<mx::array> to_result(LowerContext& ctx, const ir::Op& op, mx::array bits,
                              ir::ElementType t, const mx::Shape& shape) {
  auto storage = storage_dtype(t);
  const int width = ir::element_bit_width(t);
  if (!storage || ir::is_complex(t) || t == ir::ElementType::kPred ||
      (width != 8 && width != 16 && width != 32 && width != 64))
    return ctx.unsupported(op, "rng_bit_generator output type " +
                                   std::string(ir::element_type_name(t)));
  if (width == 8) bits = mx::astype(bits, mx::uint8);
  if (width == 16) bits = mx::astype(bits, mx::uint16);
  bits = mx::reshape(bits, shape);
  return bits.dtype() == *storage ? bits : mx::view(bits, *storage);
}

// Draws for n elements and the next state, per algorithm (see the file comment).
struct Draws {
  mx::array bits;
  mx::array state;
};

Draws threefry_draws(const mx::array& state, const std::vector<int64_t>& dims, int64_t n,
                     bool wide) {
  const mx::array key = element(state, 0), start = element(state, 1);
  int64_t used = n;
  mx::array bits = wide ? threefry_bits64(key, start, n) : threefry_bits32(key, start, dims, &used);
  return {bits, mx::stack({key, mx::add(start, u64(static_cast<uint64_t>(used)))})};
}

Draws philox_draws(const mx::array& state, int64_t state_len, int64_t n, bool wide) {
  const mx::array key = element(state, 0), low = element(state, 1);
  const mx::array high = element(state, state_len == 3 ? 2 : 0);
  int64_t used = 0;
  mx::array bits = philox_bits(key, low, high, n, wide, &used);
  mx::array next_low = mx::add(low, u64(static_cast<uint64_t>(used)));
  if (state_len == 2) return {bits, mx::stack({key, next_low})};
  mx::array next_high = mx::where(mx::less(next_low, low), mx::add(high, u64(1)), high);
  return {bits, mx::stack({key, next_low, next_high})};
}

StatusOr<Values> lower_rng_bit_generator(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1 || op.results.size() != 2)
    return ctx.malformed(op, "expects 1 operand and 2 results");
  const ir::Type& state_t = *op.operands[0].type;
  const ir::Type& out_t = *op.results[1].type;
  const int64_t state_len = state_t.rank() == 1 ? state_t.dims[0] : 0;
  int alg = op.get_enum("rng_algorithm", static_cast<int>(ir::RngAlgorithm::kDefault));
  if (alg == static_cast<int>(ir::RngAlgorithm::kDefault))  // XLA:CPU's default
    alg = static_cast<int>(ir::RngAlgorithm::kPhilox);
  const bool threefry = alg == static_cast<int>(ir::RngAlgorithm::kThreeFry);
  if (state_t.dtype != ir::ElementType::kU64 || state_len < 2 || state_len > 3 ||
      (threefry && state_len != 2))
    return ctx.unsupported(op, "rng_bit_generator state " + ir::type_to_string(state_t) +
                                   " (THREE_FRY takes u64[2], PHILOX u64[2] or u64[3])");
  const int64_t n = out_t.num_elements();
  if (n < 0) return ctx.unsupported(op, "result " + ir::type_to_string(out_t));
  // The draws are made as one flat MLX array, whose dims are int32.
  if (n > INT32_MAX) return ctx.unsupported(op, "more than 2^31 - 1 draws in one call");
  mx::Shape shape;
  for (int64_t d : out_t.dims) shape.push_back(static_cast<int>(d));
  const bool wide = ir::element_bit_width(out_t.dtype) == 64;
  if (n == 0) {  // no draws: the counter does not move
    ASSIGN_OR_RETURN(auto out, to_result(ctx, op, mx::zeros({0}, wide ? mx::uint64 : mx::uint32),
                                         out_t.dtype, {0}));
    return Values{in[0], mx::reshape(out, shape)};
  }
  Draws d = threefry ? threefry_draws(in[0], out_t.dims, n, wide)
                     : philox_draws(in[0], state_len, n, wide);
  ASSIGN_OR_RETURN(auto out, to_result(ctx, op, d.bits, out_t.dtype, shape));
  return Values{d.state, out};
}

// f32 log / log1p inside jax.random's samplers replay XLA:CPU's polynomials (xla_cpu_log.h), so
// samples are bit-exact with jax's CPU backend; elsewhere the faster MLX rule `plain` runs.
LowerFn xla_exact_in_samplers(LowerFn plain, mx::array (*exact)(const mx::array&)) {
  return [plain = std::move(plain), exact](LowerContext& ctx, const ir::Op& op,
                                           const Values& in) -> StatusOr<Values> {
    if (in.size() == 1 && in[0].dtype() == mx::float32 && passes::in_random_sampler(op))
      return Values{exact(in[0])};
    if (!plain) return ctx.unsupported(op, "no rule");
    return plain(ctx, op, in);
  };
}

}  // namespace

void register_rng(Registry& r) {
  r.add(ir::OpKind::kRngBitGenerator, lower_rng_bit_generator);
  // Wraps elementwise.cc's rules, registered before this (registry.cc's order).
  for (auto [kind, exact] : {std::pair{ir::OpKind::kLog, &xla_cpu_log_f32},
                             std::pair{ir::OpKind::kLogPlusOne, &xla_cpu_log1p_f32}}) {
    const LowerFn* plain = r.find(kind);
    r.add(kind, xla_exact_in_samplers(plain ? *plain : LowerFn(), exact));
  }
  // stablehlo.rng (lax.rng_uniform) is stateful in XLA (each run draws anew); it has no rule
  // here, so programs using it fail at compile with the op named rather than repeat numbers.
}

}  // namespace jaxmlx::lower
