// fold_transposed_dots: see transposed_dot.h.
#include "passes/transposed_dot.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/passes.h"

namespace jaxmlx::passes {
namespace {

int64_t count_free(int64_t rank, const std::vector<int64_t>& batch,
                   const std::vector<int64_t>& contracting) {
  return rank - static_cast<int64_t>(batch.size()) - static_cast<int64_t>(contracting.size());
}

// The permutation that takes dot_general(a, b)'s result [batch, lhs free, rhs free] to
// [batch, rhs free, lhs free]: dot_general(b, a)'s.
std::vector<int64_t> swapped_order(int64_t nb, int64_t nlf, int64_t nrf) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < nb; ++i) p.push_back(i);
  for (int64_t i = 0; i < nrf; ++i) p.push_back(nb + nlf + i);
  for (int64_t i = 0; i < nlf; ++i) p.push_back(nb + i);
  return p;
}

// Whether `t` (a transpose of `dot`'s only result) is the swap; if so, rewrites `dot` into the
// swapped product of `t`'s result type.
bool swap_into(ir::Op& dot, const ir::Op& t) {
  const auto* dd = dot.attr<ir::DotDims>("dot_dimension_numbers");
  if (dd == nullptr || dot.find_attr("algorithm") != nullptr || dot.operands.size() != 2)
    return false;
  const ir::Type* lt = dot.operands[0].type;
  const ir::Type* rt = dot.operands[1].type;
  if (lt == nullptr || rt == nullptr || !lt->is_tensor || !rt->is_tensor) return false;
  const int64_t nb = static_cast<int64_t>(dd->lhs_batching_dimensions.size());
  const int64_t nlf = count_free(lt->rank(), dd->lhs_batching_dimensions,
                                 dd->lhs_contracting_dimensions);
  const int64_t nrf = count_free(rt->rank(), dd->rhs_batching_dimensions,
                                 dd->rhs_contracting_dimensions);
  if (nlf == 0 || nrf == 0) return false;  // the transpose moves nothing the swap would
  if (t.get_i64s("permutation") != swapped_order(nb, nlf, nrf)) return false;
  ir::DotDims swapped{dd->rhs_batching_dimensions, dd->lhs_batching_dimensions,
                      dd->rhs_contracting_dimensions, dd->lhs_contracting_dimensions};
  std::swap(dot.operands[0], dot.operands[1]);
  dot.set_attr("dot_dimension_numbers", swapped);
  if (const auto* pc = dot.attr<ir::ArrayAttr>("precision_config"); pc && pc->items.size() == 2) {
    ir::ArrayAttr p = *pc;
    std::swap(p.items[0], p.items[1]);
    dot.set_attr("precision_config", std::move(p));
  }
  dot.results[0].type = t.results[0].type;
  return true;
}

// In each block: a dot_general whose one use is a transpose later in the same block.
void fold(ir::Region& r, const UseCounts& uses, std::unordered_map<uint32_t, ir::Value>& subst) {
  for (ir::Block& b : r.blocks) {
    std::unordered_map<uint32_t, size_t> dots;  // result id -> op index
    std::vector<bool> drop(b.ops.size(), false);
    for (size_t i = 0; i < b.ops.size(); ++i) {
      ir::Op& op = b.ops[i];
      for (ir::Region& nested : op.regions) fold(nested, uses, subst);
      if (op.kind == ir::OpKind::kDotGeneral && op.results.size() == 1) {
        auto u = uses.find(op.results[0].id);
        if (u != uses.end() && u->second == 1) dots[op.results[0].id] = i;
      } else if (op.kind == ir::OpKind::kTranspose && op.operands.size() == 1 &&
                 op.results.size() == 1) {
        auto d = dots.find(op.operands[0].id);
        if (d == dots.end() || !swap_into(b.ops[d->second], op)) continue;
        subst[op.results[0].id] = b.ops[d->second].results[0];
        drop[i] = true;
      }
    }
    erase_ops(b, drop);
  }
}

}  // namespace

Status fold_transposed_dots(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    std::unordered_map<uint32_t, ir::Value> subst;
    fold(f.body, count_uses(f.body), subst);
    if (!subst.empty()) replace_uses(f, subst);
  }
  return Status();
}

}  // namespace jaxmlx::passes
