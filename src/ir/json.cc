#include "ir/json.h"

#include <cstdio>

namespace jaxmlx::ir {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one.
size_t utf8_length(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

// A JSON string; bytes that are not valid UTF-8 are written as \u00XX so the output always parses.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\t': out += "\\t"; continue;
      case '\r': out += "\\r"; continue;
      default: break;
    }
    size_t n = c >= 0x80 ? utf8_length(s, i) : 1;
    if (c < 0x20 || n == 0) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out.append(s.substr(i, n));
      i += n - 1;
    }
  }
  return out + "\"";
}

std::string hex_u64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "\"0x%llx\"", static_cast<unsigned long long>(v));
  return buf;
}

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string type_json(const Type* t) { return quote(t ? type_to_string(*t) : "<<null>>"); }

std::string value_json(const Attribute& a);

struct Json {
  std::string operator()(const UnitAttr&) const { return "[\"unit\"]"; }
  std::string operator()(bool b) const { return b ? "true" : "false"; }
  std::string operator()(const IntAttr& a) const {
    return "[\"int\"," + quote(element_type_name(a.type)) + "," + std::to_string(a.value) + "]";
  }
  std::string operator()(const FloatAttr& a) const {
    return "[\"float\"," + quote(element_type_name(a.type)) + "," + hex_u64(a.bits) + "]";
  }
  std::string operator()(const StringAttr& a) const { return "[\"str\"," + quote(a.value) + "]"; }
  std::string operator()(const SymbolRefAttr& a) const {
    return "[\"sym\"," + quote(a.name) + "]";
  }
  std::string operator()(const EnumAttr& a) const {
    return "[\"enum\"," + quote(enum_kind_name(a.kind)) + "," +
           quote(enum_value_name(a.kind, a.value)) + "]";
  }
  std::string operator()(const I64ArrayAttr& a) const {
    return "[\"i64s\"," + ints(a.values) + "]";
  }
  std::string operator()(const BoolArrayAttr& a) const {
    std::string s = "[\"bools\",[";
    for (size_t i = 0; i < a.values.size(); ++i) s += std::string(i ? "," : "") + (a.values[i] ? "true" : "false");
    return s + "]]";
  }
  std::string operator()(const DenseElementsAttr& a) const {
    return "[\"dense\"," + type_json(a.type) + "," + (a.splat ? "true" : "false") + "," +
           quote(fnv1a64_hex(a.data)) + "," + std::to_string(a.data.size()) + "," +
           small_values(a) + "]";
  }
  // The values of small integer/bool tensors (<= 64 stored elements), else null: readable diffs
  // and default checks in compare.py.
  static std::string small_values(const DenseElementsAttr& a) {
    if (!a.type || !(is_integer(a.type->dtype) || a.type->dtype == ElementType::kPred))
      return "null";
    int bytes = element_storage_bytes(a.type->dtype);
    size_t n = bytes ? a.data.size() / bytes : 0;
    if (n > 64) return "null";
    std::string s = "[";
    bool u = is_unsigned_int(a.type->dtype);
    for (size_t i = 0; i < n; ++i) {
      int64_t v = a.int_at(static_cast<int64_t>(i));
      s += (i ? "," : "") + (u ? std::to_string(static_cast<uint64_t>(v)) : std::to_string(v));
    }
    return s + "]";
  }
  std::string operator()(const TypeAttr& a) const { return "[\"type\"," + type_json(a.type) + "]"; }
  std::string operator()(const GatherDims& g) const {
    return "[\"gather\",{\"offset_dims\":" + ints(g.offset_dims) +
           ",\"collapsed_slice_dims\":" + ints(g.collapsed_slice_dims) +
           ",\"operand_batching_dims\":" + ints(g.operand_batching_dims) +
           ",\"start_indices_batching_dims\":" + ints(g.start_indices_batching_dims) +
           ",\"start_index_map\":" + ints(g.start_index_map) +
           ",\"index_vector_dim\":" + std::to_string(g.index_vector_dim) + "}]";
  }
  std::string operator()(const ScatterDims& g) const {
    return "[\"scatter\",{\"update_window_dims\":" + ints(g.update_window_dims) +
           ",\"inserted_window_dims\":" + ints(g.inserted_window_dims) +
           ",\"input_batching_dims\":" + ints(g.input_batching_dims) +
           ",\"scatter_indices_batching_dims\":" + ints(g.scatter_indices_batching_dims) +
           ",\"scatter_dims_to_operand_dims\":" + ints(g.scatter_dims_to_operand_dims) +
           ",\"index_vector_dim\":" + std::to_string(g.index_vector_dim) + "}]";
  }
  std::string operator()(const DotDims& d) const {
    return "[\"dot\",{\"lhs_batching_dimensions\":" + ints(d.lhs_batching_dimensions) +
           ",\"rhs_batching_dimensions\":" + ints(d.rhs_batching_dimensions) +
           ",\"lhs_contracting_dimensions\":" + ints(d.lhs_contracting_dimensions) +
           ",\"rhs_contracting_dimensions\":" + ints(d.rhs_contracting_dimensions) + "}]";
  }
  std::string operator()(const ConvDims& c) const {
    return "[\"conv\",{\"input_batch_dimension\":" + std::to_string(c.input_batch_dimension) +
           ",\"input_feature_dimension\":" + std::to_string(c.input_feature_dimension) +
           ",\"input_spatial_dimensions\":" + ints(c.input_spatial_dimensions) +
           ",\"kernel_input_feature_dimension\":" +
           std::to_string(c.kernel_input_feature_dimension) +
           ",\"kernel_output_feature_dimension\":" +
           std::to_string(c.kernel_output_feature_dimension) +
           ",\"kernel_spatial_dimensions\":" + ints(c.kernel_spatial_dimensions) +
           ",\"output_batch_dimension\":" + std::to_string(c.output_batch_dimension) +
           ",\"output_feature_dimension\":" + std::to_string(c.output_feature_dimension) +
           ",\"output_spatial_dimensions\":" + ints(c.output_spatial_dimensions) + "}]";
  }
  std::string operator()(const DotAlgorithm& a) const {
    return "[\"dot_algorithm\",{\"lhs_precision_type\":" + type_json(a.lhs_precision_type) +
           ",\"rhs_precision_type\":" + type_json(a.rhs_precision_type) +
           ",\"accumulation_type\":" + type_json(a.accumulation_type) +
           ",\"lhs_component_count\":" + std::to_string(a.lhs_component_count) +
           ",\"rhs_component_count\":" + std::to_string(a.rhs_component_count) +
           ",\"num_primitive_operations\":" + std::to_string(a.num_primitive_operations) +
           ",\"allow_imprecise_accumulation\":" +
           (a.allow_imprecise_accumulation ? "true" : "false") + "}]";
  }
  std::string operator()(const ChannelHandle& c) const {
    return "[\"channel_handle\",{\"handle\":" + std::to_string(c.handle) +
           ",\"type\":" + std::to_string(c.type) + "}]";
  }
  std::string operator()(const ResultAccuracy& r) const {
    return "[\"result_accuracy\",{\"atol\":" + hex_u64(r.atol_bits) +
           ",\"rtol\":" + hex_u64(r.rtol_bits) + ",\"ulps\":" + std::to_string(r.ulps) +
           ",\"mode\":" +
           quote(enum_value_name(EnumKind::kResultAccuracyMode, static_cast<int>(r.mode))) + "}]";
  }
  std::string operator()(const OutputOperandAlias& a) const {
    return "[\"output_operand_alias\",{\"output_tuple_indices\":" + ints(a.output_tuple_indices) +
           ",\"operand_index\":" + std::to_string(a.operand_index) +
           ",\"operand_tuple_indices\":" + ints(a.operand_tuple_indices) + "}]";
  }
  std::string operator()(const ArrayAttr& a) const {
    std::string s = "[\"array\",[";
    for (size_t i = 0; i < a.items.size(); ++i) s += (i ? "," : "") + value_json(a.items[i]);
    return s + "]]";
  }
  std::string operator()(const DictAttr& d) const;
  std::string operator()(const OpaqueAttr& o) const {
    return "[\"opaque\"," + quote(o.dialect) + "," + quote(o.text) + "]";
  }
};

std::string named_json(const std::vector<NamedAttribute>& attrs) {
  std::string s = "{";
  for (size_t i = 0; i < attrs.size(); ++i)
    s += (i ? "," : "") + quote(attrs[i].name) + ":" + value_json(attrs[i].value);
  return s + "}";
}

std::string Json::operator()(const DictAttr& d) const {
  return "[\"dict\"," + named_json(d.entries) + "]";
}

std::string value_json(const Attribute& a) { return std::visit(Json{}, a.value); }

std::string loc_json(const Location* l) {
  if (!l || l->file.empty()) return "\"\"";
  return quote(l->file + ":" + std::to_string(l->line) + ":" + std::to_string(l->col));
}

std::string values_json(const std::vector<Value>& vs) {
  std::string s = "[";
  for (size_t i = 0; i < vs.size(); ++i)
    s += std::string(i ? "," : "") + "[" + std::to_string(vs[i].id) + "," + type_json(vs[i].type) + "]";
  return s + "]";
}

std::string region_json(const Region& r);

std::string op_json(const Op& op) {
  std::string s = "{\"name\":" + quote(op.name()) + ",\"operands\":[";
  for (size_t i = 0; i < op.operands.size(); ++i)
    s += (i ? "," : "") + std::to_string(op.operands[i].id);
  s += "],\"results\":" + values_json(op.results) + ",\"attrs\":" + named_json(op.attrs) +
       ",\"regions\":[";
  for (size_t i = 0; i < op.regions.size(); ++i) s += (i ? "," : "") + region_json(op.regions[i]);
  return s + "],\"loc\":" + loc_json(op.loc) + "}";
}

std::string region_json(const Region& r) {
  std::string s = "[";
  for (size_t b = 0; b < r.blocks.size(); ++b) {
    s += std::string(b ? "," : "") + "{\"args\":" + values_json(r.blocks[b].args) + ",\"ops\":[";
    for (size_t i = 0; i < r.blocks[b].ops.size(); ++i)
      s += std::string(i ? ",\n" : "\n") + op_json(r.blocks[b].ops[i]);
    s += "]}";
  }
  return s + "]";
}

std::string dicts_json(const std::vector<DictAttr>& ds) {
  std::string s = "[";
  for (size_t i = 0; i < ds.size(); ++i) s += (i ? "," : "") + named_json(ds[i].entries);
  return s + "]";
}

std::string types_json(const std::vector<const Type*>& ts) {
  std::string s = "[";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? "," : "") + type_json(ts[i]);
  return s + "]";
}

std::string func_json(const Func& f) {
  static constexpr std::string_view kVis[] = {"public", "private", "nested"};
  return "{\"name\":" + quote(f.name) + ",\"visibility\":" +
         quote(kVis[static_cast<int>(f.visibility)]) + ",\"arg_types\":" + types_json(f.arg_types) +
         ",\"result_types\":" + types_json(f.result_types) + ",\"arg_attrs\":" +
         dicts_json(f.arg_attrs) + ",\"res_attrs\":" + dicts_json(f.result_attrs) +
         ",\"attrs\":" + named_json(f.attrs) + ",\"loc\":" + loc_json(f.loc) +
         ",\"body\":" + region_json(f.body) + "}";
}

}  // namespace

std::string fnv1a64_hex(std::span<const uint8_t> data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : data) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string to_json(const Module& m) {
  std::string s = "{\"name\":" + quote(m.name) + ",\"module_attrs\":" + named_json(m.attrs) +
                  ",\"other_ops\":[";
  for (size_t i = 0; i < m.other_ops.size(); ++i) s += (i ? "," : "") + op_json(m.other_ops[i]);
  s += "],\"funcs\":[";
  for (size_t i = 0; i < m.funcs.size(); ++i) s += (i ? ",\n" : "\n") + func_json(m.funcs[i]);
  return s + "]}";
}

}  // namespace jaxmlx::ir
