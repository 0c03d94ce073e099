#include "runtime/constant_inputs.h"

#include <string_view>

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {

ConstantInputs::ConstantInputs(const std::vector<mx::array>& constants, bool compact) {
  inputs_.reserve(constants.size());
  broadcast_.reserve(constants.size());
  for (const mx::array& c : constants) {
    const bool splat = compact && c.has_primitive() &&
                       std::string_view(c.primitive().name()) == "Broadcast" &&
                       c.inputs().size() == 1 && c.inputs()[0].size() == 1 && c.size() > 1;
    inputs_.push_back(splat ? c.inputs()[0] : c);
    broadcast_.push_back(splat ? std::optional<mx::Shape>(c.shape()) : std::nullopt);
  }
}

mx::array ConstantInputs::expand(size_t i, const mx::array& traced) const {
  const std::optional<mx::Shape>& shape = broadcast_.at(i);
  return shape ? mx::broadcast_to(traced, *shape) : traced;
}

}  // namespace jaxmlx::runtime
