#include "ir/types.h"

#include <cstdio>
#include <functional>

namespace jaxmlx::ir {
namespace {

struct ElementInfo {
  std::string_view name;
  int bits;
  int storage_bytes;
};

ElementInfo info(ElementType t) {
  switch (t) {
    case ElementType::kPred: return {"i1", 1, 1};
    case ElementType::kS2: return {"i2", 2, 1};
    case ElementType::kS4: return {"i4", 4, 1};
    case ElementType::kS8: return {"i8", 8, 1};
    case ElementType::kS16: return {"i16", 16, 2};
    case ElementType::kS32: return {"i32", 32, 4};
    case ElementType::kS64: return {"i64", 64, 8};
    case ElementType::kU2: return {"ui2", 2, 1};
    case ElementType::kU4: return {"ui4", 4, 1};
    case ElementType::kU8: return {"ui8", 8, 1};
    case ElementType::kU16: return {"ui16", 16, 2};
    case ElementType::kU32: return {"ui32", 32, 4};
    case ElementType::kU64: return {"ui64", 64, 8};
    case ElementType::kF4E2M1FN: return {"f4E2M1FN", 4, 1};
    case ElementType::kF6E2M3FN: return {"f6E2M3FN", 6, 1};
    case ElementType::kF6E3M2FN: return {"f6E3M2FN", 6, 1};
    case ElementType::kF8E3M4: return {"f8E3M4", 8, 1};
    case ElementType::kF8E4M3: return {"f8E4M3", 8, 1};
    case ElementType::kF8E4M3FN: return {"f8E4M3FN", 8, 1};
    case ElementType::kF8E4M3FNUZ: return {"f8E4M3FNUZ", 8, 1};
    case ElementType::kF8E4M3B11FNUZ: return {"f8E4M3B11FNUZ", 8, 1};
    case ElementType::kF8E5M2: return {"f8E5M2", 8, 1};
    case ElementType::kF8E5M2FNUZ: return {"f8E5M2FNUZ", 8, 1};
    case ElementType::kF8E8M0FNU: return {"f8E8M0FNU", 8, 1};
    case ElementType::kBF16: return {"bf16", 16, 2};
    case ElementType::kF16: return {"f16", 16, 2};
    case ElementType::kF32: return {"f32", 32, 4};
    case ElementType::kF64: return {"f64", 64, 8};
    case ElementType::kTF32: return {"tf32", 19, 4};
    case ElementType::kC64: return {"complex<f32>", 64, 8};
    case ElementType::kC128: return {"complex<f64>", 128, 16};
    case ElementType::kIndex: return {"index", 64, 8};
    case ElementType::kQuantized: return {"!quant.uniform", 0, 0};
    case ElementType::kToken: return {"!stablehlo.token", 0, 0};
    case ElementType::kTuple: return {"tuple", 0, 0};
    case ElementType::kFunction: return {"function", 0, 0};
    case ElementType::kFuture: return {"!stablehlo.future", 0, 0};
    case ElementType::kNone: return {"none", 0, 0};
    case ElementType::kOther: return {"?", 0, 0};
  }
  return {"?", 0, 0};
}

// Shortest round-trip form is not what MLIR prints; it prints "%e" with 6 digits for quant scales.
std::string format_scale(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6e", v);
  return buf;
}

std::string quant_to_string(const QuantParams& q) {
  std::string s = "!quant.uniform<";
  const Type* st = q.storage;
  // MLIR spells the storage type by signedness flag and width: "i8", "u8".
  s += st ? (q.is_signed ? "i" : "u") + std::to_string(element_bit_width(st->dtype)) : "?";
  // MLIR prints the storage range only when it is narrower than the storage type's full range.
  if (st) {
    int bits = element_bit_width(st->dtype);
    // Full range of the storage type; at 64 bits (or a hostile width) every range is "full".
    int64_t lo = q.storage_min, hi = q.storage_max;
    if (bits > 0 && bits < 64) {
      lo = q.is_signed ? -(int64_t{1} << (bits - 1)) : 0;
      hi = q.is_signed ? (int64_t{1} << (bits - 1)) - 1
                       : static_cast<int64_t>((uint64_t{1} << bits) - 1);
    }
    if (q.storage_min != lo || q.storage_max != hi)
      s += "<" + std::to_string(q.storage_min) + ":" + std::to_string(q.storage_max) + ">";
  }
  s += ":";
  s += q.expressed ? std::string(element_type_name(q.expressed->dtype)) : "?";
  if (q.quantized_dimension >= 0) {
    s += ":" + std::to_string(q.quantized_dimension) + ", {";
    for (size_t i = 0; i < q.scales.size(); ++i) {
      if (i) s += ",";
      s += format_scale(q.scales[i]);
      int64_t zp = i < q.zero_points.size() ? q.zero_points[i] : 0;
      if (zp != 0) s += ":" + std::to_string(zp);
    }
    s += "}>";
  } else {
    s += ", " + format_scale(q.scales.empty() ? 0.0 : q.scales[0]);
    int64_t zp = q.zero_points.empty() ? 0 : q.zero_points[0];
    if (zp != 0) s += ":" + std::to_string(zp);
    s += ">";
  }
  return s;
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) {
    s += d == kDynamic ? std::string("?") : std::to_string(d);
    s += "x";
  }
  return s;
}

size_t hash_type(const Type& t) {
  size_t h = std::hash<int>()(static_cast<int>(t.dtype)) * 31 + t.ranked * 7 + t.is_tensor;
  for (int64_t d : t.dims) h = h * 1000003u ^ std::hash<int64_t>()(d);
  for (int64_t d : t.bounds) h = h * 1000033u ^ std::hash<int64_t>()(d);
  for (const Type* m : t.members) h = h * 31 ^ std::hash<const void*>()(m);
  for (const Type* m : t.results) h = h * 37 ^ std::hash<const void*>()(m);
  h ^= std::hash<std::string>()(t.text);
  return h;
}

}  // namespace

std::string_view element_type_name(ElementType t) { return info(t).name; }
int element_bit_width(ElementType t) { return info(t).bits; }
int element_storage_bytes(ElementType t) { return info(t).storage_bytes; }

bool is_float(ElementType t) {
  return t >= ElementType::kF4E2M1FN && t <= ElementType::kTF32;
}
bool is_complex(ElementType t) { return t == ElementType::kC64 || t == ElementType::kC128; }
bool is_signed_int(ElementType t) { return t >= ElementType::kS2 && t <= ElementType::kS64; }
bool is_unsigned_int(ElementType t) { return t >= ElementType::kU2 && t <= ElementType::kU64; }

bool Type::has_dynamic_dims() const {
  if (!ranked) return true;
  for (int64_t d : dims)
    if (d == kDynamic) return true;
  return false;
}

int64_t Type::num_elements() const {
  if (!is_tensor || !ranked) return -1;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d == kDynamic || d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

bool Type::operator==(const Type& o) const {
  if (dtype != o.dtype || ranked != o.ranked || is_tensor != o.is_tensor || dims != o.dims ||
      bounds != o.bounds || members != o.members || results != o.results || text != o.text)
    return false;
  if ((quant == nullptr) != (o.quant == nullptr)) return false;
  return quant == nullptr || *quant == *o.quant;
}

std::string type_to_string(const Type& t) {
  std::string elem;
  switch (t.dtype) {
    case ElementType::kToken: return "!stablehlo.token";
    case ElementType::kOther: return t.text;
    case ElementType::kTuple:
    case ElementType::kFuture: {
      std::string s = t.dtype == ElementType::kTuple ? "tuple<" : "!stablehlo.future<";
      for (size_t i = 0; i < t.members.size(); ++i)
        s += (i ? ", " : "") + type_to_string(*t.members[i]);
      return s + ">";
    }
    case ElementType::kFunction: {
      std::string s = "(";
      for (size_t i = 0; i < t.members.size(); ++i)
        s += (i ? ", " : "") + type_to_string(*t.members[i]);
      s += ") -> ";
      if (t.results.size() == 1 && t.results[0]->dtype != ElementType::kFunction)
        return s + type_to_string(*t.results[0]);
      s += "(";
      for (size_t i = 0; i < t.results.size(); ++i)
        s += (i ? ", " : "") + type_to_string(*t.results[i]);
      return s + ")";
    }
    case ElementType::kQuantized: elem = t.quant ? quant_to_string(*t.quant) : "!quant.uniform<?>"; break;
    default: elem = std::string(element_type_name(t.dtype)); break;
  }
  if (!t.is_tensor) return elem;
  if (!t.ranked) return "tensor<*x" + elem + ">";
  std::string s = "tensor<" + dims_to_string(t.dims) + elem;
  if (!t.bounds.empty()) {
    s += ", #stablehlo.bounds<";
    for (size_t i = 0; i < t.bounds.size(); ++i) {
      if (i) s += ", ";
      s += t.bounds[i] == kDynamic ? std::string("?") : std::to_string(t.bounds[i]);
    }
    s += ">";
  }
  return s + ">";
}

const Type* TypeArena::intern(Type t) {
  size_t h = hash_type(t);
  auto range = index_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it)
    if (*it->second == t) return it->second;
  types_.push_back(std::move(t));
  const Type* p = &types_.back();
  index_.emplace(h, p);
  return p;
}

const Type* TypeArena::tensor(ElementType dtype, std::vector<int64_t> dims) {
  Type t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  return intern(std::move(t));
}

const Type* TypeArena::scalar(ElementType dtype) {
  Type t;
  t.dtype = dtype;
  t.is_tensor = false;
  return intern(std::move(t));
}

}  // namespace jaxmlx::ir
