#include "lower/util.h"

#include <cmath>
#include <cstring>

#include "lower/dtypes.h"
#include "mlx/backend/cuda/cuda.h"
#include "mlx/primitives.h"

namespace jaxmlx::lower {

std::string non_native_reason(ir::ElementType t) {
  std::string name(ir::element_type_name(t));
  if (t == ir::ElementType::kF64 || t == ir::ElementType::kC128)
    return name + " compute is not supported (MLX has no " + name +
           " on GPUs); set JAX_MLX_F64=downcast to compute it in " +
           (t == ir::ElementType::kF64 ? "f32" : "complex64") + " (lossy)";
  return name + " compute is not supported (MLX has no " + name + " type)";
}

Status require_native(const LowerContext& ctx, const ir::Op& op) {
  auto check = [&](const std::vector<ir::Value>& values) -> Status {
    for (const ir::Value& v : values)
      if (v.type && !is_native(v.type->dtype))
        return ctx.unsupported(op, non_native_reason(v.type->dtype));
    return Status();
  };
  RETURN_IF_ERROR(check(op.operands));
  return check(op.results);
}

mx::array int_scalar(int64_t v, mx::Dtype d) {
  if (d == mx::uint64) return mx::array(static_cast<uint64_t>(v), d);
  if (d == mx::bool_) return mx::array(v != 0, d);
  return mx::array(v, d);
}

mx::array float_scalar(double v, mx::Dtype d) { return mx::array(static_cast<float>(v), d); }

int dtype_bits(mx::Dtype d) { return static_cast<int>(d.size()) * 8; }

mx::Dtype unsigned_of(mx::Dtype d) {
  switch (d.size()) {
    case 1: return mx::uint8;
    case 2: return mx::uint16;
    case 4: return mx::uint32;
    default: return mx::uint64;
  }
}

mx::Dtype signed_of(mx::Dtype d) {
  switch (d.size()) {
    case 1: return mx::int8;
    case 2: return mx::int16;
    case 4: return mx::int32;
    default: return mx::int64;
  }
}

bool is_unsigned_dtype(mx::Dtype d) {
  return d == mx::uint8 || d == mx::uint16 || d == mx::uint32 || d == mx::uint64;
}

namespace {

template <typename T>
std::optional<int64_t> splat_of(const mx::array& a) {
  const T* p = a.data<T>();
  if (p == nullptr) return std::nullopt;
  for (size_t i = 1; i < a.data_size(); ++i)
    if (p[i] != p[0]) return std::nullopt;
  return static_cast<int64_t>(p[0]);
}

// The data array under a splat-like constant (looking through the broadcasts and reshapes a
// splat constant usually is), when it is evaluated and small enough to scan; nullopt otherwise.
std::optional<mx::array> constant_data(const mx::array& in) {
  mx::array a = in;
  for (int depth = 0; depth < 4; ++depth) {
    if (a.is_tracer()) {
      // A traced placeholder: of a constant, or of a program input (not a constant).
      if (std::optional<mx::array> c = TracedConstants::lookup(a)) {
        a = *c;
        break;
      }
    }
    if (!a.has_primitive()) break;
    std::string name = a.primitive().name();
    if ((name != "Broadcast" && name != "Reshape") || a.inputs().size() != 1) return std::nullopt;
    a = a.inputs()[0];
  }
  if (a.has_primitive() || a.is_tracer() || !a.is_available() || a.size() == 0 ||
      a.data_size() == 0 || a.data_size() > (1 << 16))
    return std::nullopt;
  return a;
}

template <typename T>
std::optional<double> float_splat_of(const mx::array& a) {
  const T* p = a.data<T>();
  if (p == nullptr) return std::nullopt;
  for (size_t i = 1; i < a.data_size(); ++i)  // bitwise: -0.0 is not a splat of +0.0
    if (std::memcmp(&p[i], &p[0], sizeof(T)) != 0) return std::nullopt;
  const double v = static_cast<double>(static_cast<float>(p[0]));
  if (std::isnan(v)) return std::nullopt;
  return v;
}

thread_local TracedConstants* innermost_traced_constants = nullptr;

}  // namespace

TracedConstants::TracedConstants(const std::vector<mx::array>& placeholders,
                                 const std::vector<mx::array>& values)
    : outer_(innermost_traced_constants) {
  for (size_t i = 0; i < placeholders.size() && i < values.size(); ++i)
    values_.emplace(placeholders[i].id(), values[i]);
  innermost_traced_constants = this;
}

TracedConstants::~TracedConstants() { innermost_traced_constants = outer_; }

std::optional<mx::array> TracedConstants::lookup(const mx::array& a) {
  const TracedConstants* scope = innermost_traced_constants;
  if (scope == nullptr) return std::nullopt;
  auto it = scope->values_.find(a.id());
  if (it == scope->values_.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> splat_int_constant(const mx::array& in) {
  std::optional<mx::array> data = constant_data(in);
  if (!data) return std::nullopt;
  const mx::array& a = *data;
  using V = mx::Dtype::Val;
  switch (a.dtype().val()) {
    case V::int8: return splat_of<int8_t>(a);
    case V::int16: return splat_of<int16_t>(a);
    case V::int32: return splat_of<int32_t>(a);
    case V::int64: return splat_of<int64_t>(a);
    case V::uint8: return splat_of<uint8_t>(a);
    case V::uint16: return splat_of<uint16_t>(a);
    case V::uint32: return splat_of<uint32_t>(a);
    case V::uint64: return splat_of<uint64_t>(a);
    default: return std::nullopt;
  }
}

std::optional<bool> splat_bool_constant(const mx::array& in) {
  std::optional<mx::array> data = constant_data(in);
  if (!data || data->dtype() != mx::bool_) return std::nullopt;
  std::optional<int64_t> v = splat_of<bool>(*data);
  if (!v) return std::nullopt;
  return *v != 0;
}

std::optional<double> splat_float_constant(const mx::array& in) {
  std::optional<mx::array> data = constant_data(in);
  if (!data) return std::nullopt;
  using V = mx::Dtype::Val;
  switch (data->dtype().val()) {
    case V::float32: return float_splat_of<float>(*data);
    case V::float16: return float_splat_of<mx::float16_t>(*data);
    case V::bfloat16: return float_splat_of<mx::bfloat16_t>(*data);
    default: return std::nullopt;
  }
}

bool row_major_rhs_pays(int64_t lhs_rows) {
  constexpr int64_t kMinRows = 4;
  return lhs_rows >= kMinRows && mx::default_device().type == mx::Device::cpu;
}

bool on_cuda_gpu() {
  return mx::default_device().type == mx::Device::gpu && mx::cu::is_available();
}

}  // namespace jaxmlx::lower
