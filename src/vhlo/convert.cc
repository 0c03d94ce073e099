#include "vhlo/convert.h"

#include <cmath>
#include <cstring>

namespace jaxmlx::vhlo {
namespace {

using bytecode::AttrId;
using bytecode::AttrKind;
using bytecode::TypeId;
using ir::ElementType;

constexpr int kMaxLocationDepth = 64;
constexpr int64_t kMaxAttrNodes = 1 << 20;
constexpr int kMaxLocationNodes = 4096;  // a DAG of call sites must not explode

StatusOr<ElementType> scalar_element(TypeCode c) {
  switch (c) {
    case TypeCode::kBoolean: return ElementType::kPred;
    case TypeCode::kSI2: return ElementType::kS2;
    case TypeCode::kSI4: return ElementType::kS4;
    case TypeCode::kSI8: return ElementType::kS8;
    case TypeCode::kSI16: return ElementType::kS16;
    case TypeCode::kSI32: return ElementType::kS32;
    case TypeCode::kSI64: return ElementType::kS64;
    case TypeCode::kUI2: return ElementType::kU2;
    case TypeCode::kUI4: return ElementType::kU4;
    case TypeCode::kUI8: return ElementType::kU8;
    case TypeCode::kUI16: return ElementType::kU16;
    case TypeCode::kUI32: return ElementType::kU32;
    case TypeCode::kUI64: return ElementType::kU64;
    case TypeCode::kIndex: return ElementType::kIndex;
    case TypeCode::kBF16: return ElementType::kBF16;
    case TypeCode::kF16: return ElementType::kF16;
    case TypeCode::kF32: return ElementType::kF32;
    case TypeCode::kF64: return ElementType::kF64;
    case TypeCode::kTF32: return ElementType::kTF32;
    case TypeCode::kF4E2M1FN: return ElementType::kF4E2M1FN;
    case TypeCode::kF6E2M3FN: return ElementType::kF6E2M3FN;
    case TypeCode::kF6E3M2FN: return ElementType::kF6E3M2FN;
    case TypeCode::kF8E3M4: return ElementType::kF8E3M4;
    case TypeCode::kF8E4M3: return ElementType::kF8E4M3;
    case TypeCode::kF8E4M3FN: return ElementType::kF8E4M3FN;
    case TypeCode::kF8E4M3FNUZ: return ElementType::kF8E4M3FNUZ;
    case TypeCode::kF8E4M3B11FNUZ: return ElementType::kF8E4M3B11FNUZ;
    case TypeCode::kF8E5M2: return ElementType::kF8E5M2;
    case TypeCode::kF8E5M2FNUZ: return ElementType::kF8E5M2FNUZ;
    case TypeCode::kF8E8M0FNU: return ElementType::kF8E8M0FNU;
    case TypeCode::kNone: return ElementType::kNone;
    default: return invalid_argument("vhlo: not a scalar type");
  }
}

StatusOr<ElementType> builtin_float(bytecode::FloatKind k) {
  using bytecode::FloatKind;
  switch (k) {
    case FloatKind::kBF16: return ElementType::kBF16;
    case FloatKind::kF16: return ElementType::kF16;
    case FloatKind::kF32: return ElementType::kF32;
    case FloatKind::kF64: return ElementType::kF64;
    case FloatKind::kTF32: return ElementType::kTF32;
    case FloatKind::kF8E5M2: return ElementType::kF8E5M2;
    case FloatKind::kF8E4M3: return ElementType::kF8E4M3;
    case FloatKind::kF8E4M3FN: return ElementType::kF8E4M3FN;
    case FloatKind::kF8E5M2FNUZ: return ElementType::kF8E5M2FNUZ;
    case FloatKind::kF8E4M3FNUZ: return ElementType::kF8E4M3FNUZ;
    case FloatKind::kF8E4M3B11FNUZ: return ElementType::kF8E4M3B11FNUZ;
    case FloatKind::kF8E3M4: return ElementType::kF8E3M4;
    case FloatKind::kF8E8M0FNU: return ElementType::kF8E8M0FNU;
    case FloatKind::kF4E2M1FN: return ElementType::kF4E2M1FN;
    case FloatKind::kF6E2M3FN: return ElementType::kF6E2M3FN;
    case FloatKind::kF6E3M2FN: return ElementType::kF6E3M2FN;
    default: return invalid_argument("vhlo: unsupported float type (f80/f128)");
  }
}

ElementType builtin_int(uint32_t width, bytecode::Signedness s) {
  bool u = s == bytecode::Signedness::kUnsigned;
  switch (width) {
    case 1: return ElementType::kPred;
    case 2: return u ? ElementType::kU2 : ElementType::kS2;
    case 4: return u ? ElementType::kU4 : ElementType::kS4;
    case 8: return u ? ElementType::kU8 : ElementType::kS8;
    case 16: return u ? ElementType::kU16 : ElementType::kS16;
    case 32: return u ? ElementType::kU32 : ElementType::kS32;
    case 64: return u ? ElementType::kU64 : ElementType::kS64;
    default: return ElementType::kOther;
  }
}

// IEEE half / bfloat16 / single / double bit patterns to double; NaN for other formats.
double float_bits_to_double(uint64_t bits, ElementType t) {
  switch (t) {
    case ElementType::kF64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    case ElementType::kF32: {
      uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case ElementType::kBF16: {
      uint32_t b = static_cast<uint32_t>(bits & 0xffff) << 16;
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case ElementType::kF16: {
      int sign = (bits >> 15) & 1, exp = (bits >> 10) & 0x1f, man = bits & 0x3ff;
      double v = exp == 0    ? std::ldexp(man, -24)
                 : exp == 31 ? (man ? NAN : INFINITY)
                             : std::ldexp(man + 1024, exp - 25);
      return sign ? -v : v;
    }
    default: return NAN;
  }
}

// Integer value of an ApInt per the element type: sign-extended unless unsigned.
int64_t int_value_of(const bytecode::ApInt& v, ElementType t) {
  if (ir::is_unsigned_int(t) || t == ElementType::kPred) return static_cast<int64_t>(v.low());
  return v.as_signed();
}

}  // namespace

Converter::Converter(bytecode::Reader& reader, ir::Module& module)
    : reader_(reader),
      module_(module),
      types_(reader.num_types(), nullptr),
      locs_(reader.num_attrs(), nullptr) {}

// Entries refer to each other by index, so hostile input can nest deeply or form cycles;
// a depth bound turns both into an error instead of a stack overflow.
class DepthGuard {
 public:
  explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
  ~DepthGuard() { --depth_; }
  bool exceeded() const { return depth_ > kMaxNesting; }

 private:
  static constexpr int kMaxNesting = 200;
  int& depth_;
};

StatusOr<const ir::Type*> Converter::type(TypeId id) {
  if (id >= types_.size()) return invalid_argument("vhlo: type index out of range");
  if (types_[id]) return types_[id];
  DepthGuard guard(depth_);
  if (guard.exceeded()) return invalid_argument("vhlo: types nested too deeply (or cyclic)");
  ASSIGN_OR_RETURN(const bytecode::Type* bt, reader_.type(id));
  ir::Type t;
  if (const VhloType* vt = as_vhlo(bt)) {
    ASSIGN_OR_RETURN(t, convert_vhlo_type(*vt));
  } else {
    ASSIGN_OR_RETURN(t, convert_builtin_type(*bt));
  }
  types_[id] = module_.types().intern(std::move(t));
  return types_[id];
}

StatusOr<ir::Type> Converter::convert_vhlo_type(const VhloType& v) {
  ir::Type t;
  t.is_tensor = false;
  switch (v.code) {
    case TypeCode::kToken: t.dtype = ElementType::kToken; return t;
    case TypeCode::kWitness: t.dtype = ElementType::kOther; t.text = "!shape.witness"; return t;
    case TypeCode::kComplex: {
      ASSIGN_OR_RETURN(const ir::Type* e, type(v.element));
      if (e->dtype != ElementType::kF32 && e->dtype != ElementType::kF64)
        return invalid_argument("vhlo: complex of " + ir::type_to_string(*e));
      t.dtype = e->dtype == ElementType::kF32 ? ElementType::kC64 : ElementType::kC128;
      return t;
    }
    case TypeCode::kFunction:
    case TypeCode::kTuple:
    case TypeCode::kFuture: {
      t.dtype = v.code == TypeCode::kFunction ? ElementType::kFunction
                : v.code == TypeCode::kTuple  ? ElementType::kTuple
                                              : ElementType::kFuture;
      for (TypeId m : v.inputs) {
        ASSIGN_OR_RETURN(const ir::Type* mt, type(m));
        t.members.push_back(mt);
      }
      for (TypeId m : v.outputs) {
        ASSIGN_OR_RETURN(const ir::Type* mt, type(m));
        t.results.push_back(mt);
      }
      return t;
    }
    case TypeCode::kRankedTensor:
    case TypeCode::kRankedTensorWithEncoding:
    case TypeCode::kUnrankedTensor:
    case TypeCode::kRankedBuffer: {
      ASSIGN_OR_RETURN(const ir::Type* e, type(v.element));
      t = *e;  // element dtype (and quantization parameters)
      t.is_tensor = true;
      t.ranked = v.code != TypeCode::kUnrankedTensor;
      t.dims = v.shape;
      if (v.encoding != bytecode::kNone) {
        ASSIGN_OR_RETURN(const VhloAttr* enc, vhlo_attr(v.encoding, "tensor encoding"));
        if (enc->code != AttrCode::kTypeExtensions)
          return unimplemented("vhlo: tensor encoding " + std::string(attr_code_name(enc->code)));
        t.bounds = enc->ints_a;
      }
      if (v.code == TypeCode::kRankedBuffer) {
        std::string tensor_text = ir::type_to_string(t);  // "tensor<...>"
        t.text = "memref<" + tensor_text.substr(tensor_text.find('<') + 1);
        t.dtype = ElementType::kOther;
        t.is_tensor = false;
        t.quant = nullptr;
      }
      return t;
    }
    case TypeCode::kUniformQuantized:
    case TypeCode::kUniformQuantizedPerAxis: {
      auto q = std::make_shared<ir::QuantParams>();
      q->is_signed = v.flags & 1;
      ASSIGN_OR_RETURN(q->storage, type(v.storage));
      ASSIGN_OR_RETURN(q->expressed, type(v.expressed));
      q->storage_min = v.storage_min;
      q->storage_max = v.storage_max;
      q->quantized_dimension = static_cast<int32_t>(v.quantized_dimension);
      for (uint64_t b : v.scale_bits) q->scales.push_back(float_bits_to_double(b, ElementType::kF64));
      q->zero_points = v.zero_points;
      t.dtype = ElementType::kQuantized;
      t.quant = std::move(q);
      return t;
    }
    default: {
      ASSIGN_OR_RETURN(t.dtype, scalar_element(v.code));
      return t;
    }
  }
}

StatusOr<ir::Type> Converter::convert_builtin_type(const bytecode::Type& b) {
  ir::Type t;
  t.is_tensor = false;
  using bytecode::TypeKind;
  switch (b.kind) {
    case TypeKind::kInteger: t.dtype = builtin_int(b.width, b.signedness); break;
    case TypeKind::kIndex: t.dtype = ElementType::kIndex; break;
    case TypeKind::kFloat: {
      ASSIGN_OR_RETURN(t.dtype, builtin_float(b.float_kind));
      break;
    }
    case TypeKind::kNone: t.dtype = ElementType::kNone; break;
    case TypeKind::kComplex: {
      ASSIGN_OR_RETURN(const ir::Type* e, type(b.element));
      t.dtype = e->dtype == ElementType::kF64 ? ElementType::kC128 : ElementType::kC64;
      break;
    }
    case TypeKind::kFunction:
    case TypeKind::kTuple: {
      t.dtype = b.kind == TypeKind::kFunction ? ElementType::kFunction : ElementType::kTuple;
      for (TypeId m : b.kind == TypeKind::kFunction ? b.inputs : b.types) {
        ASSIGN_OR_RETURN(const ir::Type* mt, type(m));
        t.members.push_back(mt);
      }
      for (TypeId m : b.results) {
        ASSIGN_OR_RETURN(const ir::Type* mt, type(m));
        t.results.push_back(mt);
      }
      break;
    }
    case TypeKind::kRankedTensor:
    case TypeKind::kUnrankedTensor: {
      ASSIGN_OR_RETURN(const ir::Type* e, type(b.element));
      t = *e;
      t.is_tensor = true;
      t.ranked = b.kind == TypeKind::kRankedTensor;
      t.dims = b.shape;
      break;
    }
    default:
      t.dtype = ElementType::kOther;
      t.text = b.asm_text.empty() ? "!opaque" : std::string(b.asm_text);
      break;
  }
  return t;
}

StatusOr<const VhloAttr*> Converter::vhlo_attr(AttrId id, std::string_view what) {
  ASSIGN_OR_RETURN(const bytecode::Attribute* a, reader_.attr(id));
  const VhloAttr* v = as_vhlo(a);
  if (!v) return invalid_argument("vhlo: " + std::string(what) + " is not a VHLO attribute");
  return v;
}

StatusOr<ir::Attribute> Converter::attr(AttrId id) {
  DepthGuard guard(depth_);
  if (guard.exceeded()) return invalid_argument("vhlo: attributes nested too deeply (or cyclic)");
  // Conversion is not memoized, so a DAG of shared entries could expand exponentially: bound
  // the nodes one outermost attribute may expand to. Counted by attr() nesting alone: an
  // attribute reached through a type or a mesh starts its own budget too.
  DepthGuard attr_guard(attr_depth_);
  if (attr_depth_ == 1) nodes_ = 0;
  if (++nodes_ > kMaxAttrNodes) return invalid_argument("vhlo: attribute expands too much");
  ASSIGN_OR_RETURN(const bytecode::Attribute* a, reader_.attr(id));
  if (const VhloAttr* v = as_vhlo(a)) return convert_vhlo_attr(*v);
  return convert_builtin_attr(*a, id);
}

StatusOr<ir::DenseElementsAttr> Converter::dense(const ir::Type* type,
                                                  std::span<const uint8_t> blob) {
  ir::DenseElementsAttr d;
  d.type = type;
  int64_t n = type->num_elements();
  int elem = ir::element_storage_bytes(type->dtype);
  if (n < 0 || elem == 0)
    return invalid_argument("vhlo: dense elements of type " + ir::type_to_string(*type));
  if (type->dtype == ElementType::kPred) {
    // PITFALLS 2.4: i1 is bit-packed since StableHLO 1.16 and a splat true is 0xFF; normalize
    // to one 0/1 byte per element.
    std::vector<uint8_t> bytes;
    if (bytecode::dense_i1_is_packed(blob, static_cast<uint64_t>(n))) {
      bytes.resize(n);
      for (int64_t i = 0; i < n; ++i) bytes[i] = (blob[i / 8] >> (i % 8)) & 1;
    } else {
      bytes.assign(blob.begin(), blob.end());
      for (uint8_t& b : bytes) b = b != 0;
    }
    d.splat = bytes.size() == 1 && n != 1;
    if (bytes.size() != 1 && bytes.size() != static_cast<size_t>(n))
      return invalid_argument("vhlo: i1 tensor data has " + std::to_string(blob.size()) +
                              " bytes for " + std::to_string(n) + " elements");
    d.data = module_.own_bytes(std::move(bytes));
    return d;
  }
  size_t full = 0;
  const bool too_big = __builtin_mul_overflow(static_cast<size_t>(n), static_cast<size_t>(elem),
                                              &full);
  if (blob.size() == static_cast<size_t>(elem) && n != 1) {
    d.splat = true;
  } else if (too_big || blob.size() != full) {
    return invalid_argument("vhlo: tensor data has " + std::to_string(blob.size()) +
                            " bytes, " + ir::type_to_string(*type) + " needs " +
                            (too_big ? std::string("more than 2^64") : std::to_string(full)));
  }
  d.data = blob;
  return d;
}

StatusOr<ir::Attribute> Converter::convert_vhlo_attr(const VhloAttr& a) {
  switch (a.code) {
    case AttrCode::kArray: {
      ir::ArrayAttr arr;
      for (AttrId item : a.items) {
        ASSIGN_OR_RETURN(ir::Attribute v, attr(item));
        arr.items.push_back(std::move(v));
      }
      return ir::Attribute(std::move(arr));
    }
    case AttrCode::kBoolean: return ir::Attribute(a.enum_value != 0);
    case AttrCode::kComparisonDirection:
      return ir::Attribute(ir::EnumAttr{ir::EnumKind::kComparisonDirection,
                                        static_cast<int32_t>(a.enum_value)});
    case AttrCode::kComparisonType:
      return ir::Attribute(
          ir::EnumAttr{ir::EnumKind::kComparisonType, static_cast<int32_t>(a.enum_value)});
    case AttrCode::kCustomCallApiVersion:
      return ir::Attribute(ir::EnumAttr{ir::EnumKind::kCustomCallApiVersion,
                                        static_cast<int32_t>(a.enum_value)});
    case AttrCode::kFftType:
      return ir::Attribute(
          ir::EnumAttr{ir::EnumKind::kFftType, static_cast<int32_t>(a.enum_value)});
    case AttrCode::kPrecision:
      return ir::Attribute(
          ir::EnumAttr{ir::EnumKind::kPrecision, static_cast<int32_t>(a.enum_value)});
    case AttrCode::kRngAlgorithm:
      return ir::Attribute(
          ir::EnumAttr{ir::EnumKind::kRngAlgorithm, static_cast<int32_t>(a.enum_value)});
    case AttrCode::kRngDistribution:
      return ir::Attribute(
          ir::EnumAttr{ir::EnumKind::kRngDistribution, static_cast<int32_t>(a.enum_value)});
    case AttrCode::kTranspose:
      return ir::Attribute(
          ir::EnumAttr{ir::EnumKind::kTranspose, static_cast<int32_t>(a.enum_value)});
    case AttrCode::kResultAccuracyMode:
      return ir::Attribute(ir::EnumAttr{ir::EnumKind::kResultAccuracyMode,
                                        static_cast<int32_t>(a.enum_value)});
    case AttrCode::kDictionary: {
      ir::DictAttr dict;
      for (const auto& [k, v] : a.entries) {
        ASSIGN_OR_RETURN(std::string name, string_value(k, "dictionary key"));
        ASSIGN_OR_RETURN(ir::Attribute value, attr(v));
        dict.entries.push_back({std::move(name), std::move(value)});
      }
      return ir::Attribute(std::move(dict));
    }
    case AttrCode::kFloat: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      ir::FloatAttr f{a.value.low(), t->dtype, float_bits_to_double(a.value.low(), t->dtype)};
      return ir::Attribute(f);
    }
    case AttrCode::kInteger: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      return ir::Attribute(ir::IntAttr{int_value_of(a.value, t->dtype), t->dtype});
    }
    case AttrCode::kOutputOperandAlias:
      return ir::Attribute(ir::OutputOperandAlias{a.ints_a, a.int_a, a.ints_b});
    case AttrCode::kString: return ir::Attribute(ir::StringAttr{std::string(a.str)});
    case AttrCode::kTensor: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      ASSIGN_OR_RETURN(ir::DenseElementsAttr d, dense(t, a.blob));
      return ir::Attribute(d);
    }
    case AttrCode::kType: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      return ir::Attribute(ir::TypeAttr{t});
    }
    case AttrCode::kResultAccuracy: {
      ir::ResultAccuracy r{a.atol_bits, a.rtol_bits, a.int_a, ir::ResultAccuracyMode::kDefault};
      ASSIGN_OR_RETURN(const VhloAttr* mode, vhlo_attr(a.ref_a, "result accuracy mode"));
      if (mode->code != AttrCode::kResultAccuracyMode)
        return invalid_argument("vhlo: result accuracy mode has the wrong kind");
      r.mode = static_cast<ir::ResultAccuracyMode>(mode->enum_value);
      return ir::Attribute(r);
    }
    case AttrCode::kSubAxisInfo:
    case AttrCode::kAxisRef:
    case AttrCode::kReplicaGroupMeshAxes:
    case AttrCode::kMeshAxis:
    case AttrCode::kMesh: {
      // Mesh-based replica groups (1.16+): kept as StableHLO's text, not interpreted.
      ASSIGN_OR_RETURN(std::string text, mesh_text(a));
      return ir::Attribute(ir::OpaqueAttr{"stablehlo", std::move(text), {}});
    }
    default:
      return ir::Attribute(ir::OpaqueAttr{"vhlo", std::string(attr_code_name(a.code)), {}});
  }
}

// StableHLO's printed form of the mesh attributes, e.g.
// #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "x">]>.
StatusOr<std::string> Converter::mesh_text(const VhloAttr& a) {
  auto nested = [&](AttrId id) -> StatusOr<std::string> {
    ASSIGN_OR_RETURN(const VhloAttr* n, vhlo_attr(id, "mesh attribute"));
    if (n->code == AttrCode::kString) return "\"" + std::string(n->str) + "\"";
    if (n->code == AttrCode::kArray) {
      std::string s = "[";
      for (size_t i = 0; i < n->items.size(); ++i) {
        ASSIGN_OR_RETURN(std::string item, mesh_text_of(n->items[i]));
        s += (i ? ", " : "") + item;
      }
      return s + "]";
    }
    return mesh_text_of(id);
  };
  switch (a.code) {
    case AttrCode::kSubAxisInfo:
      return "(" + std::to_string(a.int_a) + ")" + std::to_string(a.int_b);
    case AttrCode::kAxisRef: {
      ASSIGN_OR_RETURN(std::string name, nested(a.ref_a));
      std::string s = "#stablehlo.axis_ref<name = " + name;
      if (a.ref_b != bytecode::kNone) {
        ASSIGN_OR_RETURN(std::string sub, mesh_text_of(a.ref_b));
        s += ", sub_axis_info = " + sub;
      }
      return s + ">";
    }
    case AttrCode::kReplicaGroupMeshAxes: {
      ASSIGN_OR_RETURN(const VhloAttr* mesh, vhlo_attr(a.ref_a, "mesh"));
      std::string m = mesh->code == AttrCode::kString ? "@" + std::string(mesh->str)
                                                      : std::string();
      if (m.empty()) {
        ASSIGN_OR_RETURN(m, mesh_text_of(a.ref_a));
      }
      ASSIGN_OR_RETURN(std::string axes, nested(a.ref_b));
      return "#stablehlo.replica_group_mesh_axes<mesh = " + m + ", axes = " + axes + ">";
    }
    case AttrCode::kMeshAxis: {
      ASSIGN_OR_RETURN(std::string name, nested(a.ref_a));
      return "#stablehlo.mesh_axis<name = " + name + ", size = " + std::to_string(a.int_a) + ">";
    }
    case AttrCode::kMesh: {
      ASSIGN_OR_RETURN(std::string axes, nested(a.ref_a));
      std::string s = "#stablehlo.mesh<axes = " + axes;
      if (a.ref_b != bytecode::kNone) {
        ASSIGN_OR_RETURN(ir::Attribute ids, attr(a.ref_b));
        s += ", device_ids = " + ir::attr_to_string(ids);
      }
      return s + ">";
    }
    default: return std::string(attr_code_name(a.code));
  }
}

StatusOr<std::string> Converter::mesh_text_of(AttrId id) {
  DepthGuard guard(depth_);
  if (guard.exceeded()) return invalid_argument("vhlo: attributes nested too deeply (or cyclic)");
  ASSIGN_OR_RETURN(const VhloAttr* n, vhlo_attr(id, "mesh attribute"));
  return mesh_text(*n);
}

StatusOr<ir::Attribute> Converter::convert_builtin_attr(const bytecode::Attribute& a,
                                                         AttrId id) {
  switch (a.kind) {
    case AttrKind::kArray: {
      ir::ArrayAttr arr;
      for (AttrId item : a.elements) {
        ASSIGN_OR_RETURN(ir::Attribute v, attr(item));
        arr.items.push_back(std::move(v));
      }
      return ir::Attribute(std::move(arr));
    }
    case AttrKind::kDictionary: {
      ir::DictAttr dict;
      for (const bytecode::NamedAttr& n : a.named) {
        ASSIGN_OR_RETURN(ir::Attribute v, attr(n.value));
        dict.entries.push_back({std::string(n.name), std::move(v)});
      }
      return ir::Attribute(std::move(dict));
    }
    case AttrKind::kString: return ir::Attribute(ir::StringAttr{std::string(a.str)});
    case AttrKind::kFlatSymbolRef:
    case AttrKind::kSymbolRef: return ir::Attribute(ir::SymbolRefAttr{std::string(a.str)});
    case AttrKind::kUnit: return ir::Attribute(ir::UnitAttr{});
    case AttrKind::kType: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      return ir::Attribute(ir::TypeAttr{t});
    }
    case AttrKind::kInteger: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      if (t->dtype == ElementType::kPred) return ir::Attribute(a.int_value.low() != 0);
      return ir::Attribute(ir::IntAttr{int_value_of(a.int_value, t->dtype), t->dtype});
    }
    case AttrKind::kFloat: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      uint64_t bits = a.int_value.low();
      return ir::Attribute(ir::FloatAttr{bits, t->dtype, float_bits_to_double(bits, t->dtype)});
    }
    case AttrKind::kDenseElements: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      ASSIGN_OR_RETURN(ir::DenseElementsAttr d, dense(t, a.data));
      return ir::Attribute(d);
    }
    case AttrKind::kDenseArray: {
      ASSIGN_OR_RETURN(const ir::Type* t, type(a.type));
      int bytes = ir::element_storage_bytes(t->dtype);
      if (t->dtype == ElementType::kS64 && a.data.size() == a.count * 8) {
        ir::I64ArrayAttr arr;
        arr.values.resize(a.count);
        if (a.count) std::memcpy(arr.values.data(), a.data.data(), a.count * 8);
        return ir::Attribute(std::move(arr));
      }
      if (t->dtype == ElementType::kPred && a.data.size() == a.count && bytes == 1) {
        ir::BoolArrayAttr arr;
        for (uint8_t b : a.data) arr.values.push_back(b != 0);
        return ir::Attribute(std::move(arr));
      }
      break;
    }
    default: break;
  }
  std::string dialect = a.dialect < reader_.dialects().size()
                            ? std::string(reader_.dialects()[a.dialect].name)
                            : std::string("builtin");
  return ir::Attribute(ir::OpaqueAttr{dialect, std::string(a.asm_text), a.raw});
}

StatusOr<int64_t> Converter::int_value(AttrId id, std::string_view what) {
  ASSIGN_OR_RETURN(const VhloAttr* a, vhlo_attr(id, what));
  if (a->code != AttrCode::kInteger)
    return invalid_argument("vhlo: " + std::string(what) + " is not an integer");
  ASSIGN_OR_RETURN(const ir::Type* t, type(a->type));
  return int_value_of(a->value, t->dtype);
}

StatusOr<bool> Converter::bool_value(AttrId id, std::string_view what) {
  ASSIGN_OR_RETURN(const VhloAttr* a, vhlo_attr(id, what));
  if (a->code != AttrCode::kBoolean)
    return invalid_argument("vhlo: " + std::string(what) + " is not a boolean");
  return a->enum_value != 0;
}

StatusOr<std::string> Converter::string_value(AttrId id, std::string_view what) {
  ASSIGN_OR_RETURN(const bytecode::Attribute* a, reader_.attr(id));
  if (const VhloAttr* v = as_vhlo(a); v && v->code == AttrCode::kString)
    return std::string(v->str);
  if (a->kind == AttrKind::kString) return std::string(a->str);
  return invalid_argument("vhlo: " + std::string(what) + " is not a string");
}

StatusOr<std::vector<int64_t>> Converter::i64s(AttrId id, std::string_view what) {
  ASSIGN_OR_RETURN(ir::DenseElementsAttr d, tensor(id, what));
  if (!ir::is_integer(d.type->dtype) || d.type->rank() > 1)
    return invalid_argument("vhlo: " + std::string(what) + " is not a 1-D integer tensor");
  std::vector<int64_t> out;
  int64_t n = d.num_elements();
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) out.push_back(d.int_at(i));
  return out;
}

StatusOr<ir::DenseElementsAttr> Converter::tensor(AttrId id, std::string_view what) {
  ASSIGN_OR_RETURN(const VhloAttr* a, vhlo_attr(id, what));
  if (a->code != AttrCode::kTensor)
    return invalid_argument("vhlo: " + std::string(what) + " is not a tensor");
  ASSIGN_OR_RETURN(const ir::Type* t, type(a->type));
  return dense(t, a->blob);
}

StatusOr<const ir::Type*> Converter::type_attr(AttrId id, std::string_view what) {
  ASSIGN_OR_RETURN(const VhloAttr* a, vhlo_attr(id, what));
  if (a->code != AttrCode::kType)
    return invalid_argument("vhlo: " + std::string(what) + " is not a type");
  ASSIGN_OR_RETURN(const ir::Type* t, type(a->type));
  return t->dtype == ElementType::kNone ? nullptr : t;
}

const ir::Location* Converter::location(AttrId id) {
  if (id == bytecode::kNone || id >= locs_.size()) return module_.unknown_location();
  if (locs_[id]) return locs_[id];
  ir::Location loc;
  int budget = kMaxLocationNodes;
  collect_location(id, loc, 0, budget);
  locs_[id] = module_.intern_location(std::move(loc));
  return locs_[id];
}

// The outermost name scope, and the first file frame depth-first, callee before caller:
// jax puts the user's innermost frame in the callee of its call-site chain.
void Converter::collect_location(AttrId id, ir::Location& out, int depth, int& budget) {
  if (depth > kMaxLocationDepth || id == bytecode::kNone || --budget < 0) return;
  auto a = reader_.attr(id);
  if (!a.ok()) return;
  const bytecode::Attribute& l = **a;
  switch (l.kind) {
    case AttrKind::kNameLoc:
      if (out.name.empty()) out.name = std::string(l.str);
      collect_location(l.a, out, depth + 1, budget);
      break;
    case AttrKind::kCallSiteLoc: {
      if (!out.name.empty()) {  // frames of a traceback under a named op: files only
        collect_location(l.a, out, depth + 1, budget);
        collect_location(l.b, out, depth + 1, budget);
        break;
      }
      // An op inlined by MLIR's inliner (jaxlib 0.11 inlines before handing the module over):
      // callsite(callee "sub" at caller "jit(f)/jit(_uniform)") names it "jit(f)/jit(_uniform)/sub",
      // as our own inliner does (passes/inline.cc), so name-scoped rules still recognise it.
      ir::Location callee, caller;
      collect_location(l.a, callee, depth + 1, budget);
      collect_location(l.b, caller, depth + 1, budget);
      out.name = caller.name.empty()   ? callee.name
                 : callee.name.empty() ? caller.name
                                       : caller.name + "/" + callee.name;
      const ir::Location& f = callee.file.empty() ? caller : callee;
      if (out.file.empty()) out.file = f.file, out.line = f.line, out.col = f.col;
      break;
    }
    case AttrKind::kFusedLoc:
      for (AttrId e : l.elements) collect_location(e, out, depth + 1, budget);
      break;
    case AttrKind::kFileLineColLoc:
      if (out.file.empty()) {
        out.file = std::string(l.str);
        out.line = l.line_col.size() > 0 ? static_cast<int>(l.line_col[0]) : 0;
        out.col = l.line_col.size() > 1 ? static_cast<int>(l.line_col[1]) : 0;
      }
      break;
    default: break;
  }
}

}  // namespace jaxmlx::vhlo
