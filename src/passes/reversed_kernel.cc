// fold_reversed_kernels: see reversed_kernel.h.
#include "passes/reversed_kernel.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace jaxmlx::passes {
namespace {

// The reverses of a func, by result id (SSA: a use is dominated by its reverse, and so by the
// reverse's operand, wherever the use is nested).
using Reverses = std::unordered_map<uint32_t, const ir::Op*>;

void collect(const ir::Region& r, Reverses& out) {
  ir::walk(r, [&](const ir::Op& op) {
    if (op.kind == ir::OpKind::kReverse && op.operands.size() == 1 && op.results.size() == 1)
      out[op.results[0].id] = &op;
  });
}

// Folds the reverse defining `conv`'s kernel into its window reversal, where every reversed dim
// is one of the kernel's spatial dims.
void fold_into(ir::Op& conv, const Reverses& reverses) {
  if (conv.operands.size() != 2) return;
  auto r = reverses.find(conv.operands[1].id);
  if (r == reverses.end()) return;
  const auto* dn = conv.attr<ir::ConvDims>("dimension_numbers");
  if (dn == nullptr) return;
  const std::vector<int64_t>& spatial = dn->kernel_spatial_dimensions;
  std::vector<bool> reversal(spatial.size(), false);
  if (const auto* rev = conv.attr<ir::BoolArrayAttr>("window_reversal")) {
    if (rev->values.size() != spatial.size()) return;  // malformed: the lowering says so
    reversal = rev->values;
  }
  std::vector<int64_t> dims = r->second->get_i64s("dimensions");
  std::sort(dims.begin(), dims.end());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end()) return;  // a dim twice
  for (int64_t d : dims) {
    auto at = std::find(spatial.begin(), spatial.end(), d);
    if (at == spatial.end()) return;  // a feature dim (or out of range): not a window reversal
    reversal[at - spatial.begin()] = !reversal[at - spatial.begin()];
  }
  conv.operands[1] = r->second->operands[0];
  conv.set_attr("window_reversal", ir::BoolArrayAttr{reversal});
}

void fold(ir::Region& r, const Reverses& reverses) {
  for (ir::Block& b : r.blocks)
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) fold(nested, reverses);
      if (op.kind == ir::OpKind::kConvolution) fold_into(op, reverses);
    }
}

}  // namespace

Status fold_reversed_kernels(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    Reverses reverses;
    collect(f.body, reverses);
    if (!reverses.empty()) fold(f.body, reverses);
  }
  return Status();
}

}  // namespace jaxmlx::passes
