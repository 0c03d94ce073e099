// pipeline: see pipeline.h.
#include "passes/pipeline.h"

#include "passes/argminmax.h"
#include "passes/attention.h"
#include "passes/chain_match.h"
#include "passes/contract_fma.h"
#include "passes/dce.h"
#include "passes/fold_tuples.h"
#include "passes/logsumexp.h"
#include "passes/negated_sum.h"
#include "passes/norm_grads.h"
#include "passes/norm_scales.h"
#include "passes/norms.h"
#include "passes/passes.h"
#include "passes/reversed_kernel.h"
#include "passes/softmax.h"
#include "passes/static_slices.h"
#include "passes/transposed_dot.h"
#include "passes/unroll.h"

namespace jaxmlx::passes {

Status prepare_for_lowering(ir::Module& m, bool on_gpu) {
  RETURN_IF_ERROR(run_passes(m));
  RETURN_IF_ERROR(fold_tuples(m));
  RETURN_IF_ERROR(unroll_counted_loops(m, unroll_limit()));
  RETURN_IF_ERROR(forward_static_slices(m));
  RETURN_IF_ERROR(contract_fma(m, fma_contraction_mode(), xla_cpu_contracts_f16()));
  if (recognizers_enabled()) {
    RETURN_IF_ERROR(recognize_argminmax(m));
    RETURN_IF_ERROR(recognize_softmax(m));
    RETURN_IF_ERROR(recognize_logsumexp(m));
    if (fast_kernels_enabled(on_gpu)) {
      RETURN_IF_ERROR(recognize_norm_grads(m));
      RETURN_IF_ERROR(drop_dead_ops(m));
      RETURN_IF_ERROR(recognize_norms(m));
      RETURN_IF_ERROR(drop_dead_ops(m));
      RETURN_IF_ERROR(fold_norm_scales(m));
      RETURN_IF_ERROR(recognize_attention(m));
    }
  }
  RETURN_IF_ERROR(fold_transposed_dots(m));  // after the recognizers' patterns
  RETURN_IF_ERROR(fold_reversed_kernels(m));
  RETURN_IF_ERROR(sink_negations(m));
  return drop_dead_ops(m);
}

}  // namespace jaxmlx::passes
