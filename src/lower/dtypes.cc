#include "lower/dtypes.h"

namespace mx = mlx::core;

namespace jaxmlx::lower {

std::optional<mx::Dtype> storage_dtype(ir::ElementType t) {
  using E = ir::ElementType;
  switch (t) {
    case E::kPred: return mx::bool_;
    case E::kS2: case E::kS4: case E::kS8: return mx::int8;
    case E::kS16: return mx::int16;
    case E::kS32: return mx::int32;
    case E::kS64: return mx::int64;
    case E::kU2: case E::kU4: case E::kU8: return mx::uint8;
    case E::kU16: return mx::uint16;
    case E::kU32: return mx::uint32;
    case E::kU64: return mx::uint64;
    case E::kF16: return mx::float16;
    case E::kBF16: return mx::bfloat16;
    case E::kF32: return mx::float32;
    case E::kC64: return mx::complex64;
    case E::kF64: case E::kC128: return mx::uint64;
    case E::kF4E2M1FN: case E::kF6E2M3FN: case E::kF6E3M2FN: case E::kF8E3M4: case E::kF8E4M3:
    case E::kF8E4M3FN: case E::kF8E4M3FNUZ: case E::kF8E4M3B11FNUZ: case E::kF8E5M2:
    case E::kF8E5M2FNUZ: case E::kF8E8M0FNU: return mx::uint8;
    default: return std::nullopt;
  }
}

bool is_native(ir::ElementType t) {
  using E = ir::ElementType;
  switch (t) {
    case E::kPred: case E::kS8: case E::kS16: case E::kS32: case E::kS64: case E::kU8:
    case E::kU16: case E::kU32: case E::kU64: case E::kF16: case E::kBF16: case E::kF32:
    case E::kC64: return true;
    default: return false;
  }
}

int storage_trailing_dim(ir::ElementType t) { return t == ir::ElementType::kC128 ? 2 : 0; }

}  // namespace jaxmlx::lower
