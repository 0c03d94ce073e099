#include "lower/lowering.h"

namespace jaxmlx::lower {

void Registry::add(ir::OpKind kind, LowerFn fn) { rules_[static_cast<size_t>(kind)] = std::move(fn); }

const LowerFn* Registry::find(ir::OpKind kind) const {
  const LowerFn& fn = rules_[static_cast<size_t>(kind)];
  return fn ? &fn : nullptr;
}

void Registry::add_custom_call(std::string target, LowerFn fn) {
  custom_calls_[std::move(target)] = std::move(fn);
}

const LowerFn* Registry::find_custom_call(std::string_view target) const {
  auto it = custom_calls_.find(target);
  return it == custom_calls_.end() ? nullptr : &it->second;
}

const Registry& Registry::global() {
  static const Registry* registry = [] {
    auto* r = new Registry;
    register_elementwise(*r);
    register_convert(*r);
    register_shape(*r);
    register_reduce(*r);
    register_dot(*r);
    register_control_flow(*r);
    register_rng(*r);
    register_custom_call(*r);
    register_fma(*r);
    register_shape_dynamic(*r);
    register_batch_norm(*r);
    register_sort(*r);
    register_convolution(*r);
    register_window(*r);
    register_linalg(*r);
    register_gather(*r);
    register_host_callback(*r);
    register_collective(*r);
    register_fft(*r);
    register_dce_sink(*r);
    register_softmax(*r);
    register_norms(*r);
    register_attention(*r);
    return r;
  }();
  return *registry;
}

}  // namespace jaxmlx::lower
