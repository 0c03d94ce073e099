#include "runtime/cpu_fusion.h"

#include <cstdlib>
#include <memory>
#include <string_view>

#include "runtime/elementwise_chains.h"
#include "runtime/fused_elementwise.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {

bool cpu_fusion_enabled() {
  const char* v = std::getenv("JAXMLX_CPU_FUSION");
  return v == nullptr || std::string_view(v) != "0";
}

namespace {

// JAXMLX_CPU_FUSION_MULTI=0: one result per fused chain (before 2026-12-01's sixth stop).
bool multi_output_enabled() {
  const char* v = std::getenv("JAXMLX_CPU_FUSION_MULTI");
  return v == nullptr || std::string_view(v) != "0";
}

}  // namespace

int fuse_cpu_elementwise(std::vector<mx::array>& outputs) {
  FusionTarget target;
  target.device = mx::Device::cpu;
  target.supports = &FusedProgram::supports;
  target.make = [](const mx::Stream& stream, std::shared_ptr<const FusedProgram> program,
                   const std::vector<mx::array>& inputs, const mx::Shape& shape,
                   const std::vector<mx::Dtype>& dtypes,
                   const std::vector<mx::array>&) -> std::optional<std::vector<mx::array>> {
    return mx::array::make_arrays(std::vector<mx::Shape>(dtypes.size(), shape), dtypes,
                                  std::make_shared<FusedElementwise>(stream, std::move(program)),
                                  inputs);
  };
  target.skip_windows = true;
  target.max_chain = 1024;
  target.multi_output = multi_output_enabled();
  return fuse_elementwise_chains(outputs, target);
}

}  // namespace jaxmlx::runtime
