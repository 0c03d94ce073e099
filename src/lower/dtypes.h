// How IR element types map to MLX dtypes.
//
// Storage: the dtype an array of that element type has inside MLX (and in a PJRT buffer).
// Types MLX lacks are stored bit-exactly in same-size integers: f64 as uint64 raw bits, c128 as
// uint64 pairs (trailing dim 2), sub-byte ints as int8/uint8, 8- and 4-bit floats as uint8 raw
// bits. Compute on those needs an explicit emulation; a rule that has none refuses the op.
#pragma once

#include <optional>

#include "ir/types.h"
#include "mlx/dtype.h"

namespace jaxmlx::lower {

// The storage dtype, or nullopt for types no array can hold (token, tuple, quantized...).
std::optional<mlx::core::Dtype> storage_dtype(ir::ElementType t);
// True when MLX computes natively in this type (storage dtype == the real type).
bool is_native(ir::ElementType t);
// Extra trailing dimension of the storage form (2 for c128), else 0.
int storage_trailing_dim(ir::ElementType t);

}  // namespace jaxmlx::lower
