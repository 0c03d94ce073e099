// value_calls: see value_calls.h.
#include "passes/value_calls.h"

#include <string_view>

#include "passes/argminmax.h"
#include "passes/attention.h"
#include "passes/contract_fma.h"
#include "passes/logsumexp.h"
#include "passes/norm_grads.h"
#include "passes/norms.h"
#include "passes/softmax.h"
#include "passes/threefry.h"

namespace jaxmlx::passes {

bool is_value_call(const ir::Op& op) {
  if (op.kind != ir::OpKind::kCustomCall) return false;
  const std::string_view t = op.get_string("call_target_name");
  for (const char* target : {kSoftmaxTarget, kSoftmaxGradTarget, kLogSumExpTarget,
                             kLogSumExpGradTarget, kLayerNormTarget, kRmsNormTarget,
                             kLayerNormGradTarget, kRmsNormGradTarget, kAttentionTarget,
                             kArgmaxTarget, kArgminTarget, kFmaTarget, kFmsTarget, kFnmaTarget,
                             kThreefryTarget})
    if (t == target) return true;
  return false;
}

}  // namespace jaxmlx::passes
