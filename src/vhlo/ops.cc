#include "vhlo/ops.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace jaxmlx::vhlo {
namespace {

using bytecode::AttrId;
using ir::OpKind;

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    size_t sp = s.find(' ');
    out.push_back(s.substr(0, sp));
    if (sp == std::string_view::npos) break;
    s.remove_prefix(sp + 1);
  }
  return out;
}

std::vector<VhloOpInfo> build_table() {
  std::vector<VhloOpInfo> t;
#define V(a, b, c) {a, b, c}
#define VHLO_OP(name, kind, minv, maxv, attrs) \
  t.push_back({name, OpKind::kind, std::array<int, 3> minv, std::array<int, 3> maxv, split(attrs), {}});
#include "vhlo/op_table.def"
#undef VHLO_OP
#undef V
  for (VhloOpInfo& op : t) {
    // ODS keeps an op's inherent attributes sorted by name (so that index lookups can bisect),
    // and writes its properties in that order.
    op.sorted_attrs = op.attrs;
    std::sort(op.sorted_attrs.begin(), op.sorted_attrs.end());
  }
  return t;
}

// Looks attributes up by name and remembers which ones a rule consumed.
class AttrMap {
 public:
  explicit AttrMap(const RawAttrs& raw) : raw_(raw) {}
  AttrId find(std::string_view name) const {
    for (const auto& [n, id] : raw_)
      if (n == name) return id;
    return bytecode::kNone;
  }
  // The attribute `name`, marking it consumed; an error if it is missing.
  StatusOr<AttrId> take(std::string_view name) {
    AttrId id = find(name);
    if (id == bytecode::kNone)
      return invalid_argument("vhlo: missing attribute '" + std::string(name) + "'");
    consumed_.insert(std::string(name));
    return id;
  }
  bool consumed(const std::string& name) const { return consumed_.count(name) > 0; }
  void consume(std::string_view name) { consumed_.insert(std::string(name)); }

 private:
  const RawAttrs& raw_;
  std::set<std::string> consumed_;
};

struct Ctx {
  Converter& conv;
  AttrMap& m;
  std::vector<ir::NamedAttribute>& out;

  StatusOr<std::vector<int64_t>> dims(std::string_view name) {
    ASSIGN_OR_RETURN(AttrId id, m.take(name));
    return conv.i64s(id, name);
  }
  // Dims that older op versions lack (e.g. gather batching dims before 1.1.0): empty.
  StatusOr<std::vector<int64_t>> dims_or_empty(std::string_view name) {
    if (m.find(name) == bytecode::kNone) return std::vector<int64_t>{};
    return dims(name);
  }
  StatusOr<int64_t> i64(std::string_view name) {
    ASSIGN_OR_RETURN(AttrId id, m.take(name));
    return conv.int_value(id, name);
  }
  void add(std::string name, ir::Attribute v) { out.push_back({std::move(name), std::move(v)}); }
};

Status implode_conv(Ctx& c) {
  ir::ConvDims d;
  ASSIGN_OR_RETURN(d.input_batch_dimension, c.i64("input_batch_dimension"));
  ASSIGN_OR_RETURN(d.input_feature_dimension, c.i64("input_feature_dimension"));
  ASSIGN_OR_RETURN(d.input_spatial_dimensions, c.dims("input_spatial_dimensions"));
  ASSIGN_OR_RETURN(d.kernel_input_feature_dimension, c.i64("kernel_input_feature_dimension"));
  ASSIGN_OR_RETURN(d.kernel_output_feature_dimension, c.i64("kernel_output_feature_dimension"));
  ASSIGN_OR_RETURN(d.kernel_spatial_dimensions, c.dims("kernel_spatial_dimensions"));
  ASSIGN_OR_RETURN(d.output_batch_dimension, c.i64("output_batch_dimension"));
  ASSIGN_OR_RETURN(d.output_feature_dimension, c.i64("output_feature_dimension"));
  ASSIGN_OR_RETURN(d.output_spatial_dimensions, c.dims("output_spatial_dimensions"));
  c.add("dimension_numbers", d);
  return Status();
}

Status implode_dot_general(Ctx& c) {
  ir::DotDims d;
  ASSIGN_OR_RETURN(d.lhs_batching_dimensions, c.dims("lhs_batching_dimensions"));
  ASSIGN_OR_RETURN(d.rhs_batching_dimensions, c.dims("rhs_batching_dimensions"));
  ASSIGN_OR_RETURN(d.lhs_contracting_dimensions, c.dims("lhs_contracting_dimensions"));
  ASSIGN_OR_RETURN(d.rhs_contracting_dimensions, c.dims("rhs_contracting_dimensions"));
  c.add("dot_dimension_numbers", d);
  if (c.m.find("lhs_precision_type") == bytecode::kNone) return Status();  // dot_general_v1
  // The algorithm is absent when every field is none_v1 (the v1 -> v2 upgrade writes that).
  ASSIGN_OR_RETURN(AttrId lhs_pt, c.m.take("lhs_precision_type"));
  ASSIGN_OR_RETURN(const ir::Type* lhs_type, c.conv.type_attr(lhs_pt, "lhs_precision_type"));
  static constexpr std::string_view kRest[] = {
      "rhs_precision_type", "accumulation_type", "lhs_component_count", "rhs_component_count",
      "num_primitive_operations", "allow_imprecise_accumulation"};
  if (lhs_type == nullptr) {
    for (std::string_view n : kRest) RETURN_IF_ERROR(c.m.take(n).status());
    return Status();
  }
  ir::DotAlgorithm a;
  a.lhs_precision_type = lhs_type;
  ASSIGN_OR_RETURN(AttrId id, c.m.take("rhs_precision_type"));
  ASSIGN_OR_RETURN(a.rhs_precision_type, c.conv.type_attr(id, "rhs_precision_type"));
  ASSIGN_OR_RETURN(id, c.m.take("accumulation_type"));
  ASSIGN_OR_RETURN(a.accumulation_type, c.conv.type_attr(id, "accumulation_type"));
  ASSIGN_OR_RETURN(a.lhs_component_count, c.i64("lhs_component_count"));
  ASSIGN_OR_RETURN(a.rhs_component_count, c.i64("rhs_component_count"));
  ASSIGN_OR_RETURN(a.num_primitive_operations, c.i64("num_primitive_operations"));
  ASSIGN_OR_RETURN(id, c.m.take("allow_imprecise_accumulation"));
  ASSIGN_OR_RETURN(a.allow_imprecise_accumulation,
                   c.conv.bool_value(id, "allow_imprecise_accumulation"));
  c.add("algorithm", a);
  return Status();
}

Status implode_gather(Ctx& c) {
  ir::GatherDims d;
  ASSIGN_OR_RETURN(d.offset_dims, c.dims("offset_dims"));
  ASSIGN_OR_RETURN(d.collapsed_slice_dims, c.dims("collapsed_slice_dims"));
  ASSIGN_OR_RETURN(d.operand_batching_dims, c.dims_or_empty("operand_batching_dims"));
  ASSIGN_OR_RETURN(d.start_indices_batching_dims, c.dims_or_empty("start_indices_batching_dims"));
  ASSIGN_OR_RETURN(d.start_index_map, c.dims("start_index_map"));
  ASSIGN_OR_RETURN(d.index_vector_dim, c.i64("index_vector_dim"));
  c.add("dimension_numbers", d);
  return Status();
}

Status implode_scatter(Ctx& c) {
  ir::ScatterDims d;
  ASSIGN_OR_RETURN(d.update_window_dims, c.dims("update_window_dims"));
  ASSIGN_OR_RETURN(d.inserted_window_dims, c.dims("inserted_window_dims"));
  ASSIGN_OR_RETURN(d.input_batching_dims, c.dims_or_empty("input_batching_dims"));
  ASSIGN_OR_RETURN(d.scatter_indices_batching_dims,
                   c.dims_or_empty("scatter_indices_batching_dims"));
  ASSIGN_OR_RETURN(d.scatter_dims_to_operand_dims, c.dims("scatter_dims_to_operand_dims"));
  ASSIGN_OR_RETURN(d.index_vector_dim, c.i64("index_vector_dim"));
  c.add("scatter_dimension_numbers", d);
  return Status();
}

Status implode_channel_handle(Ctx& c) {
  ir::ChannelHandle h;
  ASSIGN_OR_RETURN(h.handle, c.i64("channel_id"));
  ASSIGN_OR_RETURN(h.type, c.i64("channel_type"));
  c.add("channel_handle", h);
  return Status();
}

Status implode(const VhloOpInfo& info, Ctx& c) {
  switch (info.kind) {
    case OpKind::kConvolution:
    case OpKind::kDynamicConv: return implode_conv(c);
    case OpKind::kDotGeneral: return implode_dot_general(c);
    case OpKind::kGather:
    case OpKind::kDynamicGather: return implode_gather(c);
    case OpKind::kScatter: return implode_scatter(c);
    case OpKind::kSend:
    case OpKind::kRecv: return implode_channel_handle(c);
    default: return Status();
  }
}

// Attributes StableHLO stores as array<i64: ...> (VHLO stores them as 1-D tensors).
bool is_i64_array(OpKind k, std::string_view n) {
  switch (k) {
    case OpKind::kFft: return n == "fft_length";
    case OpKind::kBroadcast: return n == "broadcast_sizes";
    case OpKind::kDynamicSlice: return n == "slice_sizes";
    case OpKind::kReverse: return n == "dimensions";
    case OpKind::kTranspose: return n == "permutation";
    case OpKind::kPad:
      return n == "edge_padding_low" || n == "edge_padding_high" || n == "interior_padding";
    case OpKind::kSlice: return n == "start_indices" || n == "limit_indices" || n == "strides";
    case OpKind::kBroadcastInDim: return n == "broadcast_dimensions";
    case OpKind::kDynamicBroadcastInDim:
      return n == "broadcast_dimensions" || n == "known_expanding_dimensions" ||
             n == "known_nonexpanding_dimensions";
    case OpKind::kSelectAndScatter: return n == "window_dimensions" || n == "window_strides";
    case OpKind::kReduceWindow:
      return n == "window_dimensions" || n == "window_strides" || n == "base_dilations" ||
             n == "window_dilations";
    case OpKind::kMap:
    case OpKind::kReduce: return n == "dimensions";
    case OpKind::kGather: return n == "slice_sizes";
    case OpKind::kConvolution:
    case OpKind::kDynamicConv:
      return n == "lhs_dilation" || n == "rhs_dilation" || n == "window_strides";
    default: return false;
  }
}

bool is_collective_with_channel_id(OpKind k) {
  switch (k) {
    case OpKind::kAllGather:
    case OpKind::kAllReduce:
    case OpKind::kAllToAll:
    case OpKind::kCollectivePermute:
    case OpKind::kReduceScatter:
    case OpKind::kCollectiveBroadcast:
    case OpKind::kCollectiveReduce: return true;
    default: return false;
  }
}

// One attribute that no implosion consumed. Returns false in `handled` for the generic path.
Status convert_special(Ctx& c, const VhloOpInfo& info, const std::string& n, AttrId id,
                       bool& handled) {
  handled = true;
  OpKind k = info.kind;
  if (is_i64_array(k, n)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> v, c.conv.i64s(id, n));
    c.add(n, ir::I64ArrayAttr{std::move(v)});
    return Status();
  }
  if ((k == OpKind::kConvolution || k == OpKind::kDynamicConv) && n == "window_reversal") {
    ASSIGN_OR_RETURN(ir::DenseElementsAttr d, c.conv.tensor(id, n));
    ir::BoolArrayAttr arr;
    for (int64_t i = 0; i < d.num_elements(); ++i) arr.values.push_back(d.int_at(i) != 0);
    c.add(n, std::move(arr));
    return Status();
  }
  // dynamic_conv_v1's static padding duplicated the padding operand; 0.20.0 dropped it.
  if (info.name == "dynamic_conv_v1" && n == "padding") return Status();
  if (is_collective_with_channel_id(k) && n == "channel_id") {
    ASSIGN_OR_RETURN(int64_t h, c.conv.int_value(id, n));
    c.add("channel_handle", ir::ChannelHandle{h, 0});
    return Status();
  }
  if (n == "use_global_device_ids" || n == "has_dynamic_root") {
    // StableHLO spells these as unit attributes: present iff true.
    ASSIGN_OR_RETURN(bool b, c.conv.bool_value(id, n));
    if (b) c.add(n, ir::UnitAttr{});
    return Status();
  }
  bool symbol = (k == OpKind::kFuncCall && n == "callee") ||
                (k == OpKind::kComposite && n == "decomposition");
  if (symbol) {
    ASSIGN_OR_RETURN(std::string s, c.conv.string_value(id, n));
    c.add(n, ir::SymbolRefAttr{std::move(s)});
    return Status();
  }
  if (k == OpKind::kCustomCall && n == "called_computations") {
    ASSIGN_OR_RETURN(const VhloAttr* a, c.conv.vhlo_attr(id, n));
    if (a->code != AttrCode::kArray) return invalid_argument("vhlo: called_computations");
    ir::ArrayAttr arr;
    for (AttrId item : a->items) {
      ASSIGN_OR_RETURN(std::string s, c.conv.string_value(item, n));
      arr.items.push_back(ir::SymbolRefAttr{std::move(s)});
    }
    c.add(n, std::move(arr));
    return Status();
  }
  handled = false;
  return Status();
}

}  // namespace

const std::vector<VhloOpInfo>& all_vhlo_ops() {
  static const std::vector<VhloOpInfo>* table = new std::vector<VhloOpInfo>(build_table());
  return *table;
}

const VhloOpInfo* find_vhlo_op(std::string_view name) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string_view, const VhloOpInfo*>();
    for (const VhloOpInfo& op : all_vhlo_ops()) m->emplace(op.name, &op);
    return m;
  }();
  auto it = index->find(name);
  return it == index->end() ? nullptr : it->second;
}

StatusOr<std::vector<ir::NamedAttribute>> convert_op_attributes(Converter& conv,
                                                                const VhloOpInfo& info,
                                                                const RawAttrs& raw) {
  std::vector<ir::NamedAttribute> out;
  AttrMap m(raw);
  Ctx c{conv, m, out};
  RETURN_IF_ERROR(implode(info, c));
  for (const auto& [name, id] : raw) {
    if (m.consumed(name)) continue;
    bool handled = false;
    Status st = convert_special(c, info, name, id, handled);
    if (st.ok() && !handled) {
      auto v = conv.attr(id);
      if (v.ok()) c.add(name, std::move(v).value());
      else st = v.status();
    }
    if (!st.ok()) return st.with_context("while reading attribute '" + name + "'");
  }
  return out;
}

}  // namespace jaxmlx::vhlo
