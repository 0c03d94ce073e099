#include "pjrt/element_types.h"

#include <string>

#include "mlx/dtype.h"

namespace mx = mlx::core;

namespace jaxmlx::pjrt {

std::optional<runtime::Storage> storage_for(int type) {
  using runtime::Storage;
  switch (type) {
    case PJRT_Buffer_Type_PRED: return Storage{mx::bool_, 1, 0};
    case PJRT_Buffer_Type_S8: return Storage{mx::int8, 1, 0};
    case PJRT_Buffer_Type_S16: return Storage{mx::int16, 2, 0};
    case PJRT_Buffer_Type_S32: return Storage{mx::int32, 4, 0};
    case PJRT_Buffer_Type_S64: return Storage{mx::int64, 8, 0};
    case PJRT_Buffer_Type_U8: return Storage{mx::uint8, 1, 0};
    case PJRT_Buffer_Type_U16: return Storage{mx::uint16, 2, 0};
    case PJRT_Buffer_Type_U32: return Storage{mx::uint32, 4, 0};
    case PJRT_Buffer_Type_U64: return Storage{mx::uint64, 8, 0};
    case PJRT_Buffer_Type_F16: return Storage{mx::float16, 2, 0};
    case PJRT_Buffer_Type_BF16: return Storage{mx::bfloat16, 2, 0};
    case PJRT_Buffer_Type_F32: return Storage{mx::float32, 4, 0};
    case PJRT_Buffer_Type_C64: return Storage{mx::complex64, 8, 0};
    // Metal has no f64: keep the raw bits; compute on them is refused at compile time.
    case PJRT_Buffer_Type_F64: return Storage{mx::uint64, 8, 0};
    case PJRT_Buffer_Type_C128: return Storage{mx::uint64, 16, 2};
    // Sub-byte integers arrive one element per byte (numpy/ml_dtypes layout).
    case PJRT_Buffer_Type_S2:
    case PJRT_Buffer_Type_S4: return Storage{mx::int8, 1, 0};
    case PJRT_Buffer_Type_U2:
    case PJRT_Buffer_Type_U4: return Storage{mx::uint8, 1, 0};
    // 8- and 4-bit floats: raw bits, one byte per element.
    case PJRT_Buffer_Type_F8E5M2:
    case PJRT_Buffer_Type_F8E4M3FN:
    case PJRT_Buffer_Type_F8E4M3B11FNUZ:
    case PJRT_Buffer_Type_F8E5M2FNUZ:
    case PJRT_Buffer_Type_F8E4M3FNUZ:
    case PJRT_Buffer_Type_F8E4M3:
    case PJRT_Buffer_Type_F8E3M4:
    case PJRT_Buffer_Type_F8E8M0FNU:
    case PJRT_Buffer_Type_F4E2M1FN: return Storage{mx::uint8, 1, 0};
    default: return std::nullopt;
  }
}

std::string element_type_name(int type) {
  switch (type) {
    case PJRT_Buffer_Type_INVALID: return "invalid";
    case PJRT_Buffer_Type_PRED: return "pred";
    case PJRT_Buffer_Type_S8: return "s8";
    case PJRT_Buffer_Type_S16: return "s16";
    case PJRT_Buffer_Type_S32: return "s32";
    case PJRT_Buffer_Type_S64: return "s64";
    case PJRT_Buffer_Type_U8: return "u8";
    case PJRT_Buffer_Type_U16: return "u16";
    case PJRT_Buffer_Type_U32: return "u32";
    case PJRT_Buffer_Type_U64: return "u64";
    case PJRT_Buffer_Type_F16: return "f16";
    case PJRT_Buffer_Type_F32: return "f32";
    case PJRT_Buffer_Type_F64: return "f64";
    case PJRT_Buffer_Type_BF16: return "bf16";
    case PJRT_Buffer_Type_C64: return "c64";
    case PJRT_Buffer_Type_C128: return "c128";
    case PJRT_Buffer_Type_F8E5M2: return "f8e5m2";
    case PJRT_Buffer_Type_F8E4M3FN: return "f8e4m3fn";
    case PJRT_Buffer_Type_F8E4M3B11FNUZ: return "f8e4m3b11fnuz";
    case PJRT_Buffer_Type_F8E5M2FNUZ: return "f8e5m2fnuz";
    case PJRT_Buffer_Type_F8E4M3FNUZ: return "f8e4m3fnuz";
    case PJRT_Buffer_Type_S4: return "s4";
    case PJRT_Buffer_Type_U4: return "u4";
    case PJRT_Buffer_Type_TOKEN: return "token";
    case PJRT_Buffer_Type_S2: return "s2";
    case PJRT_Buffer_Type_U2: return "u2";
    case PJRT_Buffer_Type_F8E4M3: return "f8e4m3";
    case PJRT_Buffer_Type_F8E3M4: return "f8e3m4";
    case PJRT_Buffer_Type_F8E8M0FNU: return "f8e8m0fnu";
    case PJRT_Buffer_Type_F4E2M1FN: return "f4e2m1fn";
    case PJRT_Buffer_Type_S1: return "s1";
    case PJRT_Buffer_Type_U1: return "u1";
    default: return "type code " + std::to_string(type);
  }
}

PJRT_Buffer_Type pjrt_type_for(ir::ElementType t) {
  using E = ir::ElementType;
  switch (t) {
    case E::kPred: return PJRT_Buffer_Type_PRED;
    case E::kS2: return PJRT_Buffer_Type_S2;
    case E::kS4: return PJRT_Buffer_Type_S4;
    case E::kS8: return PJRT_Buffer_Type_S8;
    case E::kS16: return PJRT_Buffer_Type_S16;
    case E::kS32: return PJRT_Buffer_Type_S32;
    case E::kS64: return PJRT_Buffer_Type_S64;
    case E::kU2: return PJRT_Buffer_Type_U2;
    case E::kU4: return PJRT_Buffer_Type_U4;
    case E::kU8: return PJRT_Buffer_Type_U8;
    case E::kU16: return PJRT_Buffer_Type_U16;
    case E::kU32: return PJRT_Buffer_Type_U32;
    case E::kU64: return PJRT_Buffer_Type_U64;
    case E::kF4E2M1FN: return PJRT_Buffer_Type_F4E2M1FN;
    case E::kF8E3M4: return PJRT_Buffer_Type_F8E3M4;
    case E::kF8E4M3: return PJRT_Buffer_Type_F8E4M3;
    case E::kF8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
    case E::kF8E4M3FNUZ: return PJRT_Buffer_Type_F8E4M3FNUZ;
    case E::kF8E4M3B11FNUZ: return PJRT_Buffer_Type_F8E4M3B11FNUZ;
    case E::kF8E5M2: return PJRT_Buffer_Type_F8E5M2;
    case E::kF8E5M2FNUZ: return PJRT_Buffer_Type_F8E5M2FNUZ;
    case E::kF8E8M0FNU: return PJRT_Buffer_Type_F8E8M0FNU;
    case E::kBF16: return PJRT_Buffer_Type_BF16;
    case E::kF16: return PJRT_Buffer_Type_F16;
    case E::kF32: return PJRT_Buffer_Type_F32;
    case E::kF64: return PJRT_Buffer_Type_F64;
    case E::kC64: return PJRT_Buffer_Type_C64;
    case E::kC128: return PJRT_Buffer_Type_C128;
    case E::kToken: return PJRT_Buffer_Type_TOKEN;
    default: return PJRT_Buffer_Type_INVALID;
  }
}

}  // namespace jaxmlx::pjrt
