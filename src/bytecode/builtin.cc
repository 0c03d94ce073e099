// The builtin dialect's attribute and type encodings (codes as in MLIR's
// BuiltinDialectBytecode.td; each entry starts with a varint code).
#include "bytecode/internal.h"

namespace jaxmlx::bytecode::detail {

namespace {

enum AttrCode : uint64_t {
  kArrayAttr = 0, kDictionaryAttr = 1, kStringAttr = 2, kStringAttrWithType = 3,
  kFlatSymbolRefAttr = 4, kSymbolRefAttr = 5, kTypeAttr = 6, kUnitAttr = 7, kIntegerAttr = 8,
  kFloatAttr = 9, kCallSiteLoc = 10, kFileLineColLoc = 11, kFusedLoc = 12,
  kFusedLocWithMetadata = 13, kNameLoc = 14, kUnknownLoc = 15, kDenseResourceElementsAttr = 16,
  kDenseArrayAttr = 17, kDenseIntOrFPElementsAttr = 18, kDenseStringElementsAttr = 19,
  kSparseElementsAttr = 20, kDistinctAttr = 21, kFileLineColRange = 22,
};

enum TypeCode : uint64_t {
  kIntegerType = 0, kIndexType = 1, kFunctionType = 2, kBFloat16Type = 3, kFloat16Type = 4,
  kFloat32Type = 5, kFloat64Type = 6, kFloat80Type = 7, kFloat128Type = 8, kComplexType = 9,
  kMemRefType = 10, kMemRefTypeWithMemSpace = 11, kNoneType = 12, kRankedTensorType = 13,
  kRankedTensorTypeWithEncoding = 14, kTupleType = 15, kUnrankedMemRefType = 16,
  kUnrankedMemRefTypeWithMemSpace = 17, kUnrankedTensorType = 18, kVectorType = 19,
  kVectorTypeWithScalableDims = 20,
  // Newer writers give the remaining float types codes too (checked against jaxlib's MLIR).
  kFloatTF32Type = 21, kFloat8E5M2Type = 22, kFloat8E4M3Type = 23, kFloat8E4M3FNType = 24,
  kFloat8E5M2FNUZType = 25, kFloat8E4M3FNUZType = 26, kFloat8E4M3B11FNUZType = 27,
  kFloat8E3M4Type = 28, kFloat4E2M1FNType = 29, kFloat6E2M3FNType = 30, kFloat6E3M2FNType = 31,
  kFloat8E8M0FNUType = 32,
};

// Decodes a nested StringAttr reference and returns its id and value.
Status read_string_attr(DialectReader& r, AttrId* id, std::string_view* value) {
  size_t at = r.stream().offset();
  ASSIGN_OR_RETURN(AttrId a, r.read_attr_id());
  ASSIGN_OR_RETURN(const Attribute* s, r.reader().attr(a));
  if (s->kind != AttrKind::kString) {
    return r.stream().error_at(at, "expected a StringAttr reference, got attribute #" +
                                       std::to_string(a));
  }
  if (id) *id = a;
  *value = s->str;
  return Status();
}

Status read_attr_list(DialectReader& r, std::vector<AttrId>& out) {
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("attribute list"));
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(AttrId a, r.read_attr_id());
    out.push_back(a);
  }
  return Status();
}

Status read_type_list(DialectReader& r, std::vector<TypeId>& out) {
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("type list"));
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(TypeId t, r.read_type_id());
    out.push_back(t);
  }
  return Status();
}

Status read_shape(DialectReader& r, std::vector<int64_t>& out) {
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("shape rank"));
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(int64_t d, r.read_signed_varint());
    out.push_back(d);
  }
  return Status();
}

// Number of elements of a static builtin shaped type.
StatusOr<uint64_t> static_num_elements(DialectReader& r, TypeId id) {
  ASSIGN_OR_RETURN(const Type* t, r.reader().type(id));
  if (t->kind != TypeKind::kRankedTensor && t->kind != TypeKind::kVector) {
    return r.error("expected a statically shaped tensor/vector type");
  }
  uint64_t n = 1;
  for (int64_t d : t->shape) {
    if (d < 0) return r.error("expected a static shape");
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) return r.error("shape overflows");
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

// Bit width of the IntegerAttr / FloatAttr value for `type`.
StatusOr<uint32_t> value_width(DialectReader& r, TypeId id, bool is_float) {
  ASSIGN_OR_RETURN(const Type* t, r.reader().type(id));
  if (!is_float && t->kind == TypeKind::kInteger) return t->width;
  if (!is_float && t->kind == TypeKind::kIndex) return 64u;
  if (is_float && t->kind == TypeKind::kFloat) return float_bit_width(t->float_kind);
  return r.error(is_float ? "FloatAttr of a non-float type" : "IntegerAttr of a non-integer type");
}

Status read_locations(DialectReader& r, Attribute& a, uint64_t code) {
  switch (code) {
    case kCallSiteLoc:
      a.kind = AttrKind::kCallSiteLoc;
      { ASSIGN_OR_RETURN(a.a, r.read_attr_id()); }
      { ASSIGN_OR_RETURN(a.b, r.read_attr_id()); }
      return Status();
    case kFileLineColLoc: {
      a.kind = AttrKind::kFileLineColLoc;
      RETURN_IF_ERROR(read_string_attr(r, &a.a, &a.str));
      ASSIGN_OR_RETURN(uint64_t line, r.read_varint());
      ASSIGN_OR_RETURN(uint64_t col, r.read_varint());
      a.line_col = {line, col};
      return Status();
    }
    case kFileLineColRange: {
      a.kind = AttrKind::kFileLineColLoc;
      a.is_range = true;
      RETURN_IF_ERROR(read_string_attr(r, &a.a, &a.str));
      ASSIGN_OR_RETURN(uint64_t n, r.read_count("line/column"));
      if (n > 4) return r.error("FileLineColRange with more than 4 line/column values");
      for (uint64_t i = 0; i < n; ++i) {
        ASSIGN_OR_RETURN(uint64_t v, r.read_varint());
        a.line_col.push_back(v);
      }
      return Status();
    }
    case kFusedLoc:
    case kFusedLocWithMetadata:
      a.kind = AttrKind::kFusedLoc;
      RETURN_IF_ERROR(read_attr_list(r, a.elements));
      if (code == kFusedLocWithMetadata) {
        ASSIGN_OR_RETURN(a.a, r.read_attr_id());
      }
      return Status();
    case kNameLoc:
      a.kind = AttrKind::kNameLoc;
      RETURN_IF_ERROR(read_string_attr(r, &a.b, &a.str));
      { ASSIGN_OR_RETURN(a.a, r.read_attr_id()); }
      return Status();
    case kUnknownLoc:
      a.kind = AttrKind::kUnknownLoc;
      return Status();
  }
  return r.error("unknown builtin attribute code " + std::to_string(code));
}

Status read_elements(DialectReader& r, Attribute& a, uint64_t code) {
  switch (code) {
    case kDenseResourceElementsAttr:
      a.kind = AttrKind::kDenseResource;
      { ASSIGN_OR_RETURN(a.type, r.read_type_id()); }
      { ASSIGN_OR_RETURN(a.resource, r.read_resource_handle()); }
      return Status();
    case kDenseArrayAttr:
      a.kind = AttrKind::kDenseArray;
      { ASSIGN_OR_RETURN(a.type, r.read_type_id()); }
      { ASSIGN_OR_RETURN(a.count, r.read_varint()); }
      { ASSIGN_OR_RETURN(a.data, r.read_blob()); }
      return Status();
    case kDenseIntOrFPElementsAttr:
      a.kind = AttrKind::kDenseElements;
      { ASSIGN_OR_RETURN(a.type, r.read_type_id()); }
      { ASSIGN_OR_RETURN(a.data, r.read_blob()); }
      return Status();
    case kDenseStringElementsAttr: {
      a.kind = AttrKind::kDenseStringElements;
      ASSIGN_OR_RETURN(a.type, r.read_type_id());
      ASSIGN_OR_RETURN(uint64_t splat, r.read_varint());
      a.is_splat = splat != 0;
      uint64_t n = 1;
      if (!a.is_splat) {
        ASSIGN_OR_RETURN(n, static_num_elements(r, a.type));
      }
      if (n > r.stream().remaining()) return r.error("string element count exceeds the entry");
      a.strings.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        ASSIGN_OR_RETURN(std::string_view s, r.read_string());
        a.strings.push_back(s);
      }
      return Status();
    }
    case kSparseElementsAttr:
      a.kind = AttrKind::kSparseElements;
      { ASSIGN_OR_RETURN(a.type, r.read_type_id()); }
      { ASSIGN_OR_RETURN(a.a, r.read_attr_id()); }
      { ASSIGN_OR_RETURN(a.b, r.read_attr_id()); }
      return Status();
  }
  return read_locations(r, a, code);
}

}  // namespace

Status read_builtin_attr(DialectReader& r, Attribute& a) {
  ASSIGN_OR_RETURN(uint64_t code, r.read_varint());
  switch (code) {
    case kArrayAttr:
      a.kind = AttrKind::kArray;
      return read_attr_list(r, a.elements);
    case kDictionaryAttr: {
      a.kind = AttrKind::kDictionary;
      ASSIGN_OR_RETURN(uint64_t n, r.read_count("dictionary entry", 2));
      a.named.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        NamedAttr na;
        RETURN_IF_ERROR(read_string_attr(r, &na.name_attr, &na.name));
        ASSIGN_OR_RETURN(na.value, r.read_attr_id());
        a.named.push_back(na);
      }
      return Status();
    }
    case kStringAttr:
    case kStringAttrWithType:
      a.kind = AttrKind::kString;
      { ASSIGN_OR_RETURN(a.str, r.read_string()); }
      if (code == kStringAttrWithType) {
        ASSIGN_OR_RETURN(a.type, r.read_type_id());
      }
      return Status();
    case kFlatSymbolRefAttr:
      a.kind = AttrKind::kFlatSymbolRef;
      return read_string_attr(r, &a.a, &a.str);
    case kSymbolRefAttr:
      a.kind = AttrKind::kSymbolRef;
      RETURN_IF_ERROR(read_string_attr(r, &a.a, &a.str));
      return read_attr_list(r, a.elements);
    case kTypeAttr:
      a.kind = AttrKind::kType;
      { ASSIGN_OR_RETURN(a.type, r.read_type_id()); }
      return Status();
    case kUnitAttr:
      a.kind = AttrKind::kUnit;
      return Status();
    case kIntegerAttr:
    case kFloatAttr: {
      a.kind = code == kIntegerAttr ? AttrKind::kInteger : AttrKind::kFloat;
      ASSIGN_OR_RETURN(a.type, r.read_type_id());
      ASSIGN_OR_RETURN(uint32_t width, value_width(r, a.type, code == kFloatAttr));
      ASSIGN_OR_RETURN(a.int_value, r.read_apint(width));
      return Status();
    }
    case kDistinctAttr:
      a.kind = AttrKind::kDistinct;
      { ASSIGN_OR_RETURN(a.a, r.read_attr_id()); }
      return Status();
  }
  return read_elements(r, a, code);
}

namespace {

Status read_shaped(DialectReader& r, Type& t, uint64_t code) {
  switch (code) {
    case kRankedTensorTypeWithEncoding:
      { ASSIGN_OR_RETURN(t.encoding, r.read_attr_id()); }
      [[fallthrough]];
    case kRankedTensorType:
      t.kind = TypeKind::kRankedTensor;
      RETURN_IF_ERROR(read_shape(r, t.shape));
      { ASSIGN_OR_RETURN(t.element, r.read_type_id()); }
      return Status();
    case kUnrankedTensorType:
      t.kind = TypeKind::kUnrankedTensor;
      { ASSIGN_OR_RETURN(t.element, r.read_type_id()); }
      return Status();
    case kMemRefTypeWithMemSpace:
      { ASSIGN_OR_RETURN(t.memory_space, r.read_attr_id()); }
      [[fallthrough]];
    case kMemRefType:
      t.kind = TypeKind::kMemRef;
      RETURN_IF_ERROR(read_shape(r, t.shape));
      { ASSIGN_OR_RETURN(t.element, r.read_type_id()); }
      { ASSIGN_OR_RETURN(t.encoding, r.read_attr_id()); }
      return Status();
    case kUnrankedMemRefTypeWithMemSpace:
      { ASSIGN_OR_RETURN(t.memory_space, r.read_attr_id()); }
      [[fallthrough]];
    case kUnrankedMemRefType:
      t.kind = TypeKind::kUnrankedMemRef;
      { ASSIGN_OR_RETURN(t.element, r.read_type_id()); }
      return Status();
    case kVectorTypeWithScalableDims: {
      // Newer writers: a list of bool bytes (one per dim) precedes the shape.
      ASSIGN_OR_RETURN(uint64_t n, r.read_count("scalable dims"));
      for (uint64_t i = 0; i < n; ++i) {
        ASSIGN_OR_RETURN(uint8_t b, r.read_byte());
        t.scalable.push_back(b != 0);
      }
    }
      [[fallthrough]];
    case kVectorType:
      t.kind = TypeKind::kVector;
      RETURN_IF_ERROR(read_shape(r, t.shape));
      { ASSIGN_OR_RETURN(t.element, r.read_type_id()); }
      return Status();
  }
  return r.error("unknown builtin type code " + std::to_string(code));
}

}  // namespace

Status read_builtin_type(DialectReader& r, Type& t) {
  ASSIGN_OR_RETURN(uint64_t code, r.read_varint());
  switch (code) {
    case kIntegerType: {
      ASSIGN_OR_RETURN(uint64_t ws, r.read_varint());
      if ((ws & 3) == 3) return r.error("invalid integer signedness");
      if ((ws >> 2) > 16777215) return r.error("integer width exceeds 2^24-1");
      t.kind = TypeKind::kInteger;
      t.width = static_cast<uint32_t>(ws >> 2);
      t.signedness = static_cast<Signedness>(ws & 3);
      return Status();
    }
    case kIndexType: t.kind = TypeKind::kIndex; return Status();
    case kNoneType: t.kind = TypeKind::kNone; return Status();
    case kFunctionType:
      t.kind = TypeKind::kFunction;
      RETURN_IF_ERROR(read_type_list(r, t.inputs));
      return read_type_list(r, t.results);
    case kTupleType:
      t.kind = TypeKind::kTuple;
      return read_type_list(r, t.types);
    case kComplexType:
      t.kind = TypeKind::kComplex;
      { ASSIGN_OR_RETURN(t.element, r.read_type_id()); }
      return Status();
    case kBFloat16Type: case kFloat16Type: case kFloat32Type: case kFloat64Type:
    case kFloat80Type: case kFloat128Type: {
      static constexpr FloatKind kinds[] = {FloatKind::kBF16, FloatKind::kF16, FloatKind::kF32,
                                            FloatKind::kF64, FloatKind::kF80, FloatKind::kF128};
      t.kind = TypeKind::kFloat;
      t.float_kind = kinds[code - kBFloat16Type];
      return Status();
    }
  }
  if (code >= kFloatTF32Type && code <= kFloat8E8M0FNUType) {
    static constexpr FloatKind kinds[] = {
        FloatKind::kTF32,       FloatKind::kF8E5M2,      FloatKind::kF8E4M3,
        FloatKind::kF8E4M3FN,   FloatKind::kF8E5M2FNUZ,  FloatKind::kF8E4M3FNUZ,
        FloatKind::kF8E4M3B11FNUZ, FloatKind::kF8E3M4,   FloatKind::kF4E2M1FN,
        FloatKind::kF6E2M3FN,   FloatKind::kF6E3M2FN,    FloatKind::kF8E8M0FNU};
    t.kind = TypeKind::kFloat;
    t.float_kind = kinds[code - kFloatTF32Type];
    return Status();
  }
  return read_shaped(r, t, code);
}

bool parse_builtin_type_asm(std::string_view text, Type& out) {
  if (auto f = float_kind_from_name(text)) {
    out.kind = TypeKind::kFloat;
    out.float_kind = *f;
    return true;
  }
  if (text == "index") return out.kind = TypeKind::kIndex, true;
  if (text == "none") return out.kind = TypeKind::kNone, true;
  Signedness s = Signedness::kSignless;
  std::string_view digits;
  if (text.size() > 1 && text[0] == 'i') {
    digits = text.substr(1);
  } else if (text.size() > 2 && (text[0] == 's' || text[0] == 'u') && text[1] == 'i') {
    s = text[0] == 's' ? Signedness::kSigned : Signedness::kUnsigned;
    digits = text.substr(2);
  } else {
    return false;
  }
  if (digits.empty() || digits.size() > 8) return false;
  uint32_t w = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    w = w * 10 + static_cast<uint32_t>(c - '0');
  }
  out.kind = TypeKind::kInteger;
  out.width = w;
  out.signedness = s;
  return true;
}

}  // namespace jaxmlx::bytecode::detail
