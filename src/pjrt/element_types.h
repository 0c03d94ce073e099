// PJRT element types: how each is stored in MLX and named in messages.
#pragma once

#include <optional>
#include <string_view>

#include "ir/types.h"
#include "pjrt/abi.h"
#include "runtime/buffer.h"

namespace jaxmlx::pjrt {

// Storage for a PJRT element type, or nullopt for types no buffer can hold (INVALID, TOKEN,
// sub-byte S1/U1, out-of-range codes).
std::optional<runtime::Storage> storage_for(int type);

// "f32", "bf16", "s4", ...; "type code 99" for unknown codes.
std::string element_type_name(int type);

// The PJRT element type of an IR element type; INVALID for types no buffer holds.
PJRT_Buffer_Type pjrt_type_for(ir::ElementType t);

}  // namespace jaxmlx::pjrt
