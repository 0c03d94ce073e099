#include "vhlo/dialect.h"

#include <string>

namespace jaxmlx::vhlo {
namespace {

using bytecode::AttrId;
using bytecode::DialectReader;
using bytecode::TypeId;

// Number of values of each enum attribute (VhloEnums.td); a larger stored value is an error.
uint64_t enum_limit(AttrCode c) {
  switch (c) {
    case AttrCode::kComparisonDirection: return 6;
    case AttrCode::kComparisonType: return 5;
    case AttrCode::kCustomCallApiVersion: return 5;
    case AttrCode::kFftType: return 4;
    case AttrCode::kPrecision: return 3;
    case AttrCode::kRngAlgorithm: return 3;
    case AttrCode::kRngDistribution: return 3;  // 1 and 2 only; checked below
    case AttrCode::kTranspose: return 4;
    case AttrCode::kResultAccuracyMode: return 3;
    default: return 0;
  }
}

StatusOr<std::vector<AttrId>> read_attr_list(DialectReader& r) {
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("attribute list"));
  std::vector<AttrId> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(AttrId id, r.read_attr_id());
    out.push_back(id);
  }
  return out;
}

StatusOr<std::vector<TypeId>> read_type_list(DialectReader& r) {
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("type list"));
  std::vector<TypeId> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(TypeId id, r.read_type_id());
    out.push_back(id);
  }
  return out;
}

StatusOr<std::vector<int64_t>> read_svarint_list(DialectReader& r) {
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("integer list"));
  std::vector<int64_t> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(int64_t v, r.read_signed_varint());
    out.push_back(v);
  }
  return out;
}

// An APFloat of IEEE double semantics, as its 64-bit pattern.
StatusOr<uint64_t> read_f64_bits(DialectReader& r) {
  ASSIGN_OR_RETURN(bytecode::ApInt v, r.read_apint(64));
  return v.low();
}

// Width of the scalar type `id` (a VHLO float or integer type), decoding it.
StatusOr<int> scalar_width(DialectReader& r, TypeId id, bool want_float) {
  ASSIGN_OR_RETURN(const bytecode::Type* t, r.reader().type(id));
  const VhloType* vt = as_vhlo(t);
  if (!vt) return r.error("expected a VHLO scalar type");
  int w = want_float ? float_code_width(vt->code) : integer_code_width(vt->code);
  if (w == 0)
    return r.error(std::string("unsupported ") + (want_float ? "float" : "integer") +
                   " attribute type " + std::string(type_code_name(vt->code)));
  return w;
}

Status read_enum(DialectReader& r, VhloAttr& a) {
  ASSIGN_OR_RETURN(a.enum_value, r.read_varint());
  bool bad = a.enum_value >= enum_limit(a.code) ||
             (a.code == AttrCode::kRngDistribution && a.enum_value == 0);
  if (bad)
    return r.error("value " + std::to_string(a.enum_value) + " out of range for " +
                   std::string(attr_code_name(a.code)));
  return Status();
}

Status read_attr_body(DialectReader& r, VhloAttr& a) {
  switch (a.code) {
    case AttrCode::kArray: {
      ASSIGN_OR_RETURN(a.items, read_attr_list(r));
      return Status();
    }
    case AttrCode::kBoolean: {
      ASSIGN_OR_RETURN(a.enum_value, r.read_varint());
      if (a.enum_value > 1) return r.error("boolean value " + std::to_string(a.enum_value));
      return Status();
    }
    case AttrCode::kComparisonDirection:
    case AttrCode::kComparisonType:
    case AttrCode::kCustomCallApiVersion:
    case AttrCode::kFftType:
    case AttrCode::kPrecision:
    case AttrCode::kRngAlgorithm:
    case AttrCode::kRngDistribution:
    case AttrCode::kTranspose:
    case AttrCode::kResultAccuracyMode:
      return read_enum(r, a);
    case AttrCode::kDictionary: {
      ASSIGN_OR_RETURN(uint64_t n, r.read_count("dictionary", 2));
      for (uint64_t i = 0; i < n; ++i) {
        ASSIGN_OR_RETURN(AttrId k, r.read_attr_id());
        ASSIGN_OR_RETURN(AttrId v, r.read_attr_id());
        a.entries.emplace_back(k, v);
      }
      return Status();
    }
    case AttrCode::kFloat:
    case AttrCode::kInteger: {
      bool is_float = a.code == AttrCode::kFloat;
      ASSIGN_OR_RETURN(a.type, r.read_type_id());
      ASSIGN_OR_RETURN(int width, scalar_width(r, a.type, is_float));
      ASSIGN_OR_RETURN(a.value, r.read_apint(static_cast<uint32_t>(width)));
      return Status();
    }
    case AttrCode::kOutputOperandAlias: {
      ASSIGN_OR_RETURN(a.ints_a, read_svarint_list(r));
      ASSIGN_OR_RETURN(a.int_a, r.read_signed_varint());
      ASSIGN_OR_RETURN(a.ints_b, read_svarint_list(r));
      return Status();
    }
    case AttrCode::kString: {
      ASSIGN_OR_RETURN(a.str, r.read_string());
      return Status();
    }
    case AttrCode::kTensor: {
      ASSIGN_OR_RETURN(a.type, r.read_type_id());
      ASSIGN_OR_RETURN(a.blob, r.read_blob());
      return Status();
    }
    case AttrCode::kType: {
      ASSIGN_OR_RETURN(a.type, r.read_type_id());
      return Status();
    }
    case AttrCode::kTypeExtensions: {
      ASSIGN_OR_RETURN(a.ints_a, read_svarint_list(r));
      return Status();
    }
    case AttrCode::kResultAccuracy: {
      ASSIGN_OR_RETURN(a.atol_bits, read_f64_bits(r));
      ASSIGN_OR_RETURN(a.rtol_bits, read_f64_bits(r));
      ASSIGN_OR_RETURN(a.int_a, r.read_signed_varint());
      ASSIGN_OR_RETURN(a.ref_a, r.read_attr_id());
      return Status();
    }
    case AttrCode::kSubAxisInfo: {
      ASSIGN_OR_RETURN(a.int_a, r.read_signed_varint());
      ASSIGN_OR_RETURN(a.int_b, r.read_signed_varint());
      return Status();
    }
    case AttrCode::kAxisRef: {
      ASSIGN_OR_RETURN(a.ref_a, r.read_attr_id());
      ASSIGN_OR_RETURN(uint64_t has_sub, r.read_varint());
      if (has_sub) {
        ASSIGN_OR_RETURN(a.ref_b, r.read_attr_id());
      }
      return Status();
    }
    case AttrCode::kReplicaGroupMeshAxes: {
      ASSIGN_OR_RETURN(a.ref_a, r.read_attr_id());
      ASSIGN_OR_RETURN(a.ref_b, r.read_attr_id());
      return Status();
    }
    case AttrCode::kMeshAxis: {
      ASSIGN_OR_RETURN(a.ref_a, r.read_attr_id());
      ASSIGN_OR_RETURN(a.int_a, r.read_signed_varint());
      return Status();
    }
    case AttrCode::kMesh: {
      ASSIGN_OR_RETURN(a.ref_a, r.read_attr_id());
      // An optional attribute: varint (index << 1 | present).
      ASSIGN_OR_RETURN(auto opt, r.read_varint_with_flag());
      if (opt.second) {
        if (opt.first >= r.reader().num_attrs()) return r.error("mesh device_ids out of range");
        a.ref_b = static_cast<AttrId>(opt.first);
      }
      return Status();
    }
  }
  return r.error("unknown vhlo attribute code");
}

Status read_quantized(DialectReader& r, VhloType& t, bool per_axis) {
  ASSIGN_OR_RETURN(t.flags, r.read_varint());
  ASSIGN_OR_RETURN(t.storage, r.read_type_id());
  ASSIGN_OR_RETURN(t.expressed, r.read_type_id());
  if (!per_axis) {
    ASSIGN_OR_RETURN(uint64_t scale, read_f64_bits(r));
    t.scale_bits.push_back(scale);
    ASSIGN_OR_RETURN(int64_t zp, r.read_signed_varint());
    t.zero_points.push_back(zp);
    ASSIGN_OR_RETURN(t.storage_min, r.read_signed_varint());
    ASSIGN_OR_RETURN(t.storage_max, r.read_signed_varint());
    return Status();
  }
  ASSIGN_OR_RETURN(uint64_t qdim, r.read_varint());
  t.quantized_dimension = static_cast<int64_t>(qdim);
  ASSIGN_OR_RETURN(t.storage_min, r.read_signed_varint());
  ASSIGN_OR_RETURN(t.storage_max, r.read_signed_varint());
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("quantization scales"));
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(uint64_t s, read_f64_bits(r));
    t.scale_bits.push_back(s);
  }
  ASSIGN_OR_RETURN(t.zero_points, read_svarint_list(r));
  return Status();
}

Status read_type_body(DialectReader& r, VhloType& t) {
  switch (t.code) {
    case TypeCode::kComplex:
    case TypeCode::kUnrankedTensor: {
      ASSIGN_OR_RETURN(t.element, r.read_type_id());
      return Status();
    }
    case TypeCode::kFunction: {
      ASSIGN_OR_RETURN(t.inputs, read_type_list(r));
      ASSIGN_OR_RETURN(t.outputs, read_type_list(r));
      return Status();
    }
    case TypeCode::kRankedTensorWithEncoding:
    case TypeCode::kRankedTensor:
    case TypeCode::kRankedBuffer: {
      if (t.code == TypeCode::kRankedTensorWithEncoding) {
        ASSIGN_OR_RETURN(t.encoding, r.read_attr_id());
      }
      ASSIGN_OR_RETURN(t.shape, read_svarint_list(r));
      ASSIGN_OR_RETURN(t.element, r.read_type_id());
      return Status();
    }
    case TypeCode::kTuple:
    case TypeCode::kFuture: {
      ASSIGN_OR_RETURN(t.inputs, read_type_list(r));
      return Status();
    }
    case TypeCode::kUniformQuantized: return read_quantized(r, t, false);
    case TypeCode::kUniformQuantizedPerAxis: return read_quantized(r, t, true);
    default:
      return Status();  // scalar / token / none / witness / index: no payload
  }
}

}  // namespace

std::string_view attr_code_name(AttrCode c) {
  static constexpr std::string_view kNames[] = {
      "?", "array_v1", "bool_v1", "comparison_direction_v1", "comparison_type_v1",
      "api_version_v1", "dict_v1", "fft_type_v1", "float_v1", "integer_v1",
      "output_operand_alias_v1", "precision_v1", "rng_algorithm_v1", "rng_distribution_v1",
      "string_v1", "tensor_v1", "transpose_v1", "type_v1", "type_extensions_v1",
      "result_accuracy_mode_v1", "result_accuracy_v1", "sub_axis_info_v1", "axis_ref_v1",
      "replica_group_mesh_axes_v1", "mesh_axis_v1", "mesh_v1"};
  int i = static_cast<int>(c);
  return i <= kMaxAttrCode ? kNames[i] : "?";
}

std::string_view type_code_name(TypeCode c) {
  static constexpr std::string_view kNames[] = {
      "i1_v1", "complex_v1", "bf16_v1", "f16_v1", "f32_v1", "f64_v1", "f8E4M3FN_v1",
      "f8E5M2_v1", "func_v1", "index_v1", "i4_v1", "i8_v1", "i16_v1", "i32_v1", "i64_v1",
      "ui4_v1", "ui8_v1", "ui16_v1", "ui32_v1", "ui64_v1", "tensor_v1", "tensor_v1(encoding)",
      "token_v1", "tuple_v1", "quant_v1", "unranked_tensor_v1", "witness_v1",
      "f8E4M3FNUZ_v1", "f8E5M2FNUZ_v1", "f8E4M3B11FNUZ_v1", "quant_per_axis_v1", "i2_v1",
      "ui2_v1", "none_v1", "tf32_v1", "f8E4M3_v1", "f8E3M4_v1", "f4E2M1FN_v1", "f6E2M3FN_v1",
      "f6E3M2FN_v1", "f8E8M0FNU_v1", "buffer_v1", "future_v1"};
  int i = static_cast<int>(c);
  return i <= kMaxTypeCode ? kNames[i] : "?";
}

int float_code_width(TypeCode c) {
  switch (c) {
    case TypeCode::kBF16:
    case TypeCode::kF16: return 16;
    case TypeCode::kF32: return 32;
    case TypeCode::kF64: return 64;
    case TypeCode::kTF32: return 19;
    case TypeCode::kF4E2M1FN: return 4;
    case TypeCode::kF6E2M3FN:
    case TypeCode::kF6E3M2FN: return 6;
    case TypeCode::kF8E4M3FN:
    case TypeCode::kF8E5M2:
    case TypeCode::kF8E4M3FNUZ:
    case TypeCode::kF8E5M2FNUZ:
    case TypeCode::kF8E4M3B11FNUZ:
    case TypeCode::kF8E4M3:
    case TypeCode::kF8E3M4:
    case TypeCode::kF8E8M0FNU: return 8;
    default: return 0;
  }
}

int integer_code_width(TypeCode c) {
  switch (c) {
    case TypeCode::kBoolean: return 1;
    case TypeCode::kSI2:
    case TypeCode::kUI2: return 2;
    case TypeCode::kSI4:
    case TypeCode::kUI4: return 4;
    case TypeCode::kSI8:
    case TypeCode::kUI8: return 8;
    case TypeCode::kSI16:
    case TypeCode::kUI16: return 16;
    case TypeCode::kSI32:
    case TypeCode::kUI32: return 32;
    case TypeCode::kSI64:
    case TypeCode::kUI64:
    case TypeCode::kIndex: return 64;
    default: return 0;
  }
}

StatusOr<std::unique_ptr<bytecode::DialectObject>> VhloHook::read_attribute(DialectReader& r) {
  ASSIGN_OR_RETURN(uint64_t code, r.read_varint());
  if (code == 0 || code > kMaxAttrCode)
    return r.error("unknown vhlo attribute code " + std::to_string(code));
  auto a = std::make_unique<VhloAttr>();
  a->code = static_cast<AttrCode>(code);
  RETURN_IF_ERROR(read_attr_body(r, *a));
  return std::unique_ptr<bytecode::DialectObject>(std::move(a));
}

StatusOr<std::unique_ptr<bytecode::DialectObject>> VhloHook::read_type(DialectReader& r) {
  ASSIGN_OR_RETURN(uint64_t code, r.read_varint());
  if (code > kMaxTypeCode) return r.error("unknown vhlo type code " + std::to_string(code));
  auto t = std::make_unique<VhloType>();
  t->code = static_cast<TypeCode>(code);
  RETURN_IF_ERROR(read_type_body(r, *t));
  return std::unique_ptr<bytecode::DialectObject>(std::move(t));
}

const VhloAttr* as_vhlo(const bytecode::Attribute* a) {
  if (!a || a->kind != bytecode::AttrKind::kDialect) return nullptr;
  return dynamic_cast<const VhloAttr*>(a->custom.get());
}

const VhloType* as_vhlo(const bytecode::Type* t) {
  if (!t || t->kind != bytecode::TypeKind::kDialect) return nullptr;
  return dynamic_cast<const VhloType*>(t->custom.get());
}

}  // namespace jaxmlx::vhlo
