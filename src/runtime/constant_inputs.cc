#include "runtime/constant_inputs.h"

#include <string>
#include <string_view>
#include <unordered_map>

#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "mlx/primitives.h"
#include "runtime/device_scalars.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {

namespace {

// Dtype, shape and bytes of a small evaluated row-contiguous array; empty for any other.
std::string value_key(const mx::array& a) {
  if (!a.is_available() || a.nbytes() > ConstantInputs::kMaxSharedBytes ||
      !a.flags().row_contiguous)
    return {};
  std::string key;
  auto put = [&key](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  const auto kind = a.dtype().val();
  put(&kind, sizeof(kind));
  const size_t ndim = a.ndim();
  put(&ndim, sizeof(ndim));
  for (int d : a.shape()) put(&d, sizeof(d));
  put(a.data<char>(), a.nbytes());
  return key;
}

}  // namespace

ConstantInputs::ConstantInputs(const std::vector<mx::array>& constants, bool compact,
                               bool device) {
  std::vector<mx::array> given;
  given.reserve(constants.size());
  broadcast_.reserve(constants.size());
  for (const mx::array& c : constants) {
    const bool splat = compact && c.has_primitive() &&
                       std::string_view(c.primitive().name()) == "Broadcast" &&
                       c.inputs().size() == 1 && c.inputs()[0].size() == 1 && c.size() > 1;
    given.push_back(splat ? c.inputs()[0] : c);
    broadcast_.push_back(splat ? std::optional<mx::Shape>(c.shape()) : std::nullopt);
  }
  mx::eval(given);
  std::unordered_map<std::string, size_t> seen;
  index_.reserve(given.size());
  for (mx::array& a : given) {
    std::string key = value_key(a);
    if (!key.empty()) {
      auto [it, added] = seen.emplace(std::move(key), inputs_.size());
      if (!added) {
        index_.push_back(it->second);
        continue;
      }
    }
    index_.push_back(inputs_.size());
    inputs_.push_back(device && in_small_buffer(a) ? device_copy(a) : std::move(a));
  }
}

mx::array ConstantInputs::expand(size_t i, const mx::array& traced) const {
  const std::optional<mx::Shape>& shape = broadcast_.at(i);
  return shape ? mx::broadcast_to(traced, *shape) : traced;
}

}  // namespace jaxmlx::runtime
