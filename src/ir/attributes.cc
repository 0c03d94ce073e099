#include "ir/attributes.h"

#include <cstdio>
#include <cstring>

namespace jaxmlx::ir {
namespace {

constexpr std::string_view kComparisonDirection[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
constexpr std::string_view kComparisonType[] = {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED",
                                                "UNSIGNED"};
constexpr std::string_view kPrecision[] = {"DEFAULT", "HIGH", "HIGHEST"};
constexpr std::string_view kFftType[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
constexpr std::string_view kRngAlgorithm[] = {"DEFAULT", "THREE_FRY", "PHILOX"};
constexpr std::string_view kRngDistribution[] = {"", "UNIFORM", "NORMAL"};
constexpr std::string_view kTranspose[] = {"TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE",
                                           "ADJOINT"};
constexpr std::string_view kApiVersion[] = {
    "API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"};
constexpr std::string_view kResultAccuracyMode[] = {"DEFAULT", "HIGHEST", "TOLERANCE"};

std::span<const std::string_view> enum_names(EnumKind k) {
  switch (k) {
    case EnumKind::kComparisonDirection: return kComparisonDirection;
    case EnumKind::kComparisonType: return kComparisonType;
    case EnumKind::kPrecision: return kPrecision;
    case EnumKind::kFftType: return kFftType;
    case EnumKind::kRngAlgorithm: return kRngAlgorithm;
    case EnumKind::kRngDistribution: return kRngDistribution;
    case EnumKind::kTranspose: return kTranspose;
    case EnumKind::kCustomCallApiVersion: return kApiVersion;
    case EnumKind::kResultAccuracyMode: return kResultAccuracyMode;
  }
  return {};
}

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

std::string float_to_string(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6e", v);
  return buf;
}

std::string hex(std::span<const uint8_t> data) {
  static const char* digits = "0123456789ABCDEF";
  std::string s = "0x";
  for (uint8_t b : data) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string dense_to_string(const DenseElementsAttr& d) {
  std::string body;
  ElementType et = d.type ? d.type->dtype : ElementType::kNone;
  int64_t n = d.splat ? 1 : d.num_elements();
  if (is_integer(et) || et == ElementType::kPred) {
    if (n > 16) {
      body = "\"" + hex(d.data) + "\"";
    } else {
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = d.int_at(i);
        std::string e = et == ElementType::kPred ? (v ? "true" : "false") : std::to_string(v);
        body += (i ? ", " : "") + e;
      }
      if (!d.splat && d.type && d.type->rank() != 0) body = "[" + body + "]";
    }
  } else {
    body = "\"" + hex(d.data.size() > 64 ? d.data.first(64) : d.data) +
           (d.data.size() > 64 ? "..." : "") + "\"";
  }
  return "dense<" + body + "> : " + (d.type ? type_to_string(*d.type) : "?");
}

struct Printer {
  std::string operator()(const UnitAttr&) const { return "unit"; }
  std::string operator()(bool b) const { return b ? "true" : "false"; }
  std::string operator()(const IntAttr& a) const {
    return std::to_string(a.value) + " : " + std::string(element_type_name(a.type));
  }
  std::string operator()(const FloatAttr& a) const {
    return float_to_string(a.value) + " : " + std::string(element_type_name(a.type));
  }
  std::string operator()(const StringAttr& a) const { return "\"" + a.value + "\""; }
  std::string operator()(const SymbolRefAttr& a) const { return "@" + a.name; }
  std::string operator()(const EnumAttr& a) const {
    return "#stablehlo<" + std::string(enum_kind_name(a.kind)) + " " +
           std::string(enum_value_name(a.kind, a.value)) + ">";
  }
  std::string operator()(const I64ArrayAttr& a) const {
    return a.values.empty() ? "array<i64>" : "array<i64: " + ints_to_string(a.values) + ">";
  }
  std::string operator()(const BoolArrayAttr& a) const {
    std::string s = "array<i1";
    for (size_t i = 0; i < a.values.size(); ++i)
      s += std::string(i ? ", " : ": ") + (a.values[i] ? "true" : "false");
    return s + ">";
  }
  std::string operator()(const DenseElementsAttr& a) const { return dense_to_string(a); }
  std::string operator()(const TypeAttr& a) const {
    return a.type ? type_to_string(*a.type) : "<<null type>>";
  }
  std::string operator()(const GatherDims& g) const {
    return "#stablehlo.gather<offset_dims = [" + ints_to_string(g.offset_dims) +
           "], collapsed_slice_dims = [" + ints_to_string(g.collapsed_slice_dims) +
           "], operand_batching_dims = [" + ints_to_string(g.operand_batching_dims) +
           "], start_indices_batching_dims = [" + ints_to_string(g.start_indices_batching_dims) +
           "], start_index_map = [" + ints_to_string(g.start_index_map) +
           "], index_vector_dim = " + std::to_string(g.index_vector_dim) + ">";
  }
  std::string operator()(const ScatterDims& g) const {
    return "#stablehlo.scatter<update_window_dims = [" + ints_to_string(g.update_window_dims) +
           "], inserted_window_dims = [" + ints_to_string(g.inserted_window_dims) +
           "], input_batching_dims = [" + ints_to_string(g.input_batching_dims) +
           "], scatter_indices_batching_dims = [" +
           ints_to_string(g.scatter_indices_batching_dims) +
           "], scatter_dims_to_operand_dims = [" +
           ints_to_string(g.scatter_dims_to_operand_dims) +
           "], index_vector_dim = " + std::to_string(g.index_vector_dim) + ">";
  }
  std::string operator()(const DotDims& d) const {
    return "#stablehlo.dot<lhs_batching_dimensions = [" +
           ints_to_string(d.lhs_batching_dimensions) + "], rhs_batching_dimensions = [" +
           ints_to_string(d.rhs_batching_dimensions) + "], lhs_contracting_dimensions = [" +
           ints_to_string(d.lhs_contracting_dimensions) + "], rhs_contracting_dimensions = [" +
           ints_to_string(d.rhs_contracting_dimensions) + "]>";
  }
  std::string operator()(const ConvDims& c) const {
    auto i = [](int64_t v) { return std::to_string(v); };
    return "#stablehlo.conv<in(b=" + i(c.input_batch_dimension) + ", f=" +
           i(c.input_feature_dimension) + ", s=[" + ints_to_string(c.input_spatial_dimensions) +
           "]) kernel(i=" + i(c.kernel_input_feature_dimension) + ", o=" +
           i(c.kernel_output_feature_dimension) + ", s=[" +
           ints_to_string(c.kernel_spatial_dimensions) + "]) out(b=" +
           i(c.output_batch_dimension) + ", f=" + i(c.output_feature_dimension) + ", s=[" +
           ints_to_string(c.output_spatial_dimensions) + "])>";
  }
  std::string operator()(const DotAlgorithm& a) const {
    auto t = [](const Type* ty) { return ty ? type_to_string(*ty) : std::string("?"); };
    return "#stablehlo.dot_algorithm<lhs_precision_type = " + t(a.lhs_precision_type) +
           ", rhs_precision_type = " + t(a.rhs_precision_type) +
           ", accumulation_type = " + t(a.accumulation_type) +
           ", lhs_component_count = " + std::to_string(a.lhs_component_count) +
           ", rhs_component_count = " + std::to_string(a.rhs_component_count) +
           ", num_primitive_operations = " + std::to_string(a.num_primitive_operations) +
           ", allow_imprecise_accumulation = " +
           (a.allow_imprecise_accumulation ? "true" : "false") + ">";
  }
  std::string operator()(const ChannelHandle& c) const {
    return "#stablehlo.channel_handle<handle = " + std::to_string(c.handle) +
           ", type = " + std::to_string(c.type) + ">";
  }
  std::string operator()(const ResultAccuracy& r) const {
    double atol, rtol;
    std::memcpy(&atol, &r.atol_bits, 8);
    std::memcpy(&rtol, &r.rtol_bits, 8);
    return "#stablehlo.result_accuracy<atol = " + float_to_string(atol) +
           ", rtol = " + float_to_string(rtol) + ", ulps = " + std::to_string(r.ulps) +
           ", mode = #stablehlo.result_accuracy_mode<" +
           std::string(enum_value_name(EnumKind::kResultAccuracyMode,
                                       static_cast<int>(r.mode))) +
           ">>";
  }
  std::string operator()(const OutputOperandAlias& a) const {
    return "#stablehlo.output_operand_alias<output_tuple_indices = [" +
           ints_to_string(a.output_tuple_indices) +
           "], operand_index = " + std::to_string(a.operand_index) +
           ", operand_tuple_indices = [" + ints_to_string(a.operand_tuple_indices) + "]>";
  }
  std::string operator()(const ArrayAttr& a) const {
    std::string s = "[";
    for (size_t i = 0; i < a.items.size(); ++i) s += (i ? ", " : "") + attr_to_string(a.items[i]);
    return s + "]";
  }
  std::string operator()(const DictAttr& d) const {
    std::string s = "{";
    for (size_t i = 0; i < d.entries.size(); ++i)
      s += (i ? ", " : "") + d.entries[i].name + " = " + attr_to_string(d.entries[i].value);
    return s + "}";
  }
  std::string operator()(const OpaqueAttr& o) const {
    return "#" + o.dialect + "<" + (o.text.empty() ? "opaque" : o.text) + ">";
  }
};

}  // namespace

std::string_view enum_kind_name(EnumKind k) {
  switch (k) {
    case EnumKind::kComparisonDirection: return "comparison_direction";
    case EnumKind::kComparisonType: return "comparison_type";
    case EnumKind::kPrecision: return "precision";
    case EnumKind::kFftType: return "fft_type";
    case EnumKind::kRngAlgorithm: return "rng_algorithm";
    case EnumKind::kRngDistribution: return "rng_distribution";
    case EnumKind::kTranspose: return "transpose";
    case EnumKind::kCustomCallApiVersion: return "api_version";
    case EnumKind::kResultAccuracyMode: return "result_accuracy_mode";
  }
  return "?";
}

std::string_view enum_value_name(EnumKind k, int64_t value) {
  auto names = enum_names(k);
  if (value < 0 || value >= static_cast<int64_t>(names.size())) return "";
  return names[value];
}

int enum_value_count(EnumKind k) { return static_cast<int>(enum_names(k).size()); }

bool DenseElementsAttr::operator==(const DenseElementsAttr& o) const {
  return type == o.type && splat == o.splat && data.size() == o.data.size() &&
         (data.empty() || std::memcmp(data.data(), o.data.data(), data.size()) == 0);
}

int64_t DenseElementsAttr::int_at(int64_t i) const {
  if (!type) return 0;
  int bytes = element_storage_bytes(type->dtype);
  if (bytes <= 0 || bytes > 8) return 0;
  size_t off = splat ? 0 : static_cast<size_t>(i) * bytes;
  if (off + bytes > data.size()) return 0;
  uint64_t u = 0;
  std::memcpy(&u, data.data() + off, bytes);  // little-endian host assumed (x86-64, arm64)
  int bits = element_bit_width(type->dtype);
  if (type->dtype == ElementType::kPred) return u != 0;
  if (is_signed_int(type->dtype) && bits < 64) {
    uint64_t sign = uint64_t{1} << (bits - 1);
    u &= (uint64_t{1} << bits) - 1;
    return static_cast<int64_t>((u ^ sign) - sign);
  }
  return static_cast<int64_t>(u);
}

bool ArrayAttr::operator==(const ArrayAttr& o) const { return items == o.items; }

const Attribute* DictAttr::find(std::string_view name) const {
  for (const NamedAttribute& e : entries)
    if (e.name == name) return &e.value;
  return nullptr;
}

bool DictAttr::operator==(const DictAttr& o) const { return entries == o.entries; }

std::string attr_to_string(const Attribute& a) { return std::visit(Printer{}, a.value); }

}  // namespace jaxmlx::ir
