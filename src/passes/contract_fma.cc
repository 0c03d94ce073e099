// contract_fma: see contract_fma.h for the patterns and why.
#include "passes/contract_fma.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "passes/passes.h"
#include "passes/xla_cpu_version.h"

namespace jaxmlx::passes {
namespace {

bool is_float(const ir::Value& v, bool f16) {
  return v.type != nullptr &&
         (v.type->dtype == ir::ElementType::kF32 || (f16 && v.type->dtype == ir::ElementType::kF16));
}

// A candidate product: the index of a single-use f32 multiply (or of a negate of one) in the block.
struct Product {
  size_t mul = 0;              // the multiply op
  size_t neg = SIZE_MAX;       // the negate op wrapping it, if any
};

class BlockContractor {
 public:
  BlockContractor(ir::Block& b, const UseCounts& uses, FmaContraction mode, bool f16)
      : block_(b), uses_(uses), mode_(mode), f16_(f16) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const ir::Op& op = b.ops[i];
      if (op.results.size() == 1 && is_float(op.results[0], f16_)) def_[op.results[0].id] = i;
    }
  }

  void run() {
    for (size_t i = 0; i < block_.ops.size(); ++i) {
      ir::Op& op = block_.ops[i];
      if ((op.kind != ir::OpKind::kAdd && op.kind != ir::OpKind::kSubtract) ||
          op.operands.size() != 2 || !is_float(op.results[0], f16_))
        continue;
      if (mode_ == FmaContraction::kSamplers && !in_random_sampler(op)) continue;
      contract(op);
    }
    std::vector<ir::Op> kept;
    kept.reserve(block_.ops.size());
    for (size_t i = 0; i < block_.ops.size(); ++i)
      if (!dead_[i]) kept.push_back(std::move(block_.ops[i]));
    block_.ops = std::move(kept);
  }

 private:
  const ir::Op* single_use_def(const ir::Value& v, ir::OpKind kind, size_t* index) const {
    auto it = def_.find(v.id);
    if (it == def_.end() || dead_[it->second]) return nullptr;
    auto u = uses_.find(v.id);
    if (u == uses_.end() || u->second != 1) return nullptr;
    const ir::Op& d = block_.ops[it->second];
    if (d.kind != kind) return nullptr;
    // The product and the sum in one type (an f16 product never feeds an f32 sum here).
    if (d.results[0].type->dtype != dtype_) return nullptr;
    *index = it->second;
    return &d;
  }

  // `v` as a product a*b (negated when `allow_neg` and v = -(a*b)).
  bool as_product(const ir::Value& v, bool allow_neg, Product* p) const {
    if (single_use_def(v, ir::OpKind::kMultiply, &p->mul)) return true;
    size_t neg;
    const ir::Op* n = allow_neg ? single_use_def(v, ir::OpKind::kNegate, &neg) : nullptr;
    if (n == nullptr || n->operands.size() != 1) return false;
    if (!single_use_def(n->operands[0], ir::OpKind::kMultiply, &p->mul)) return false;
    p->neg = neg;
    return true;
  }

  void contract(ir::Op& op) {
    const bool add = op.kind == ir::OpKind::kAdd;
    dtype_ = op.results[0].type->dtype;
    Product p;
    int side;  // which operand of `op` is the product
    if (as_product(op.operands[0], add, &p)) side = 0;
    else if (as_product(op.operands[1], add, &p)) side = 1;
    else return;
    const bool negated = p.neg != SIZE_MAX;
    // a*b+c, c+a*b -> fma; a*b-c -> fms; c-a*b, -(a*b)+c -> fnma.
    const char* target = add ? (negated ? kFnmaTarget : kFmaTarget)
                             : (side == 0 ? kFmsTarget : kFnmaTarget);
    const ir::Op& mul = block_.ops[p.mul];
    ir::Op fma;
    fma.kind = ir::OpKind::kCustomCall;
    fma.operands = {mul.operands[0], mul.operands[1], op.operands[1 - side]};
    fma.results = op.results;
    fma.loc = op.loc;
    fma.set_attr("call_target_name", ir::StringAttr{target});
    op = std::move(fma);
    dead_[p.mul] = true;
    if (negated) dead_[p.neg] = true;
  }

  ir::Block& block_;
  const UseCounts& uses_;
  const FmaContraction mode_;
  const bool f16_;
  ir::ElementType dtype_ = ir::ElementType::kF32;  // of the add being contracted
  std::unordered_map<uint32_t, size_t> def_;
  std::vector<bool> dead_ = std::vector<bool>(block_.ops.size(), false);
};

void contract_region(ir::Region& r, const UseCounts& uses, FmaContraction mode, bool f16) {
  for (ir::Block& b : r.blocks) {
    for (ir::Op& op : b.ops)
      for (ir::Region& nested : op.regions) contract_region(nested, uses, mode, f16);
    BlockContractor(b, uses, mode, f16).run();
  }
}

}  // namespace

FmaContraction fma_contraction_mode() {
  const char* v = std::getenv("JAX_MLX_CONTRACT_FMA");
  const std::string_view s = v == nullptr ? "" : v;
  if (s == "0" || s == "none") return FmaContraction::kNone;
  if (s == "1" || s == "all") return FmaContraction::kAll;
  return FmaContraction::kSamplers;
}

namespace {

// Whether this x86 host has AVX512-FP16. jaxlib 0.10's XLA:CPU then computes f16 natively (its
// float support no longer widens f16 ops to f32), and LLVM contracts the half multiply-adds as
// jaxlib 0.11's does everywhere (measured: jaxlib 0.10.2 on a Xeon with avx512_fp16 gave
// uniform(key, s, float16, -2.5, 7.0) up to 4 f16 ULP from per-op rounding and none from the
// contracted form). Not measured off x86 (Apple silicon has FP16 arithmetic too): false there.
bool x86_host_has_avx512_fp16() {
#if defined(__x86_64__) && defined(__linux__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512fp16");
#else
  return false;
#endif
}

}  // namespace

bool xla_cpu_contracts_f16() {
  static const bool native_f16 = x86_host_has_avx512_fp16();
  return reference_jaxlib_at_least(0, 11) || native_f16;
}

Status contract_fma(ir::Module& m, FmaContraction mode, bool f16) {
  if (mode == FmaContraction::kNone) return Status();
  for (ir::Func& f : m.funcs) {
    contract_region(f.body, count_uses(f.body), mode, f16);
  }
  return Status();
}

bool in_random_sampler(const ir::Op& op) {
  static constexpr std::string_view kSamplers[] = {
      "_uniform", "_normal", "_normal_real", "_truncated_normal", "_exponential", "_gumbel",
      "_laplace", "_logistic", "_gamma", "_beta", "_dirichlet", "_cauchy", "_t", "_pareto",
      "_poisson", "_poisson_knuth", "_poisson_rejection", "_chisquare", "_f", "_maxwell",
      "_double_sided_maxwell", "_weibull_min", "_generalized_normal", "_rayleigh", "_wald",
      "_geometric", "_lognormal", "_binomial", "_binomial_inversion", "_btrs", "_ball",
      "_multivariate_normal", "_triangular", "_bernoulli"};
  if (op.loc == nullptr || op.loc->name.empty()) return false;
  const std::string& n = op.loc->name;
  for (std::string_view s : kSamplers)
    if (n.find("jit(" + std::string(s) + ")") != std::string::npos) return true;
  return false;
}

}  // namespace jaxmlx::passes
