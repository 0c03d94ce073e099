#include "ir/module.h"

#include <algorithm>
#include <unordered_map>

namespace jaxmlx::ir {
namespace {

struct OpKindInfo {
  std::string_view name;
  int num_operands, num_results, num_regions;
  bool elementwise;
};

constexpr OpKindInfo kOpKindInfo[] = {
#define OP(kind, name, nops, nres, nreg, ew) {name, nops, nres, nreg, ew != 0},
#include "ir/ops.def"
#undef OP
};

const OpKindInfo& kind_info(OpKind k) { return kOpKindInfo[static_cast<int>(k)]; }

}  // namespace

std::string_view op_kind_name(OpKind k) { return kind_info(k).name; }
int op_kind_num_operands(OpKind k) { return kind_info(k).num_operands; }
int op_kind_num_results(OpKind k) { return kind_info(k).num_results; }
int op_kind_num_regions(OpKind k) { return kind_info(k).num_regions; }
bool op_kind_is_elementwise(OpKind k) { return kind_info(k).elementwise; }

OpKind op_kind_from_name(std::string_view name) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<std::string_view, OpKind>();
    for (int i = 0; i < kNumOpKinds; ++i)
      if (!kOpKindInfo[i].name.empty()) m->emplace(kOpKindInfo[i].name, static_cast<OpKind>(i));
    return m;
  }();
  auto it = table->find(name);
  return it == table->end() ? OpKind::kGeneric : it->second;
}

std::string Location::to_string() const {
  std::string s = name;
  if (!file.empty()) {
    if (!s.empty()) s += "  ";
    s += file + ":" + std::to_string(line);
    if (col > 0) s += ":" + std::to_string(col);
  }
  return s.empty() ? "unknown location" : s;
}

std::string_view Op::name() const {
  return kind == OpKind::kGeneric ? std::string_view(generic_name) : op_kind_name(kind);
}

const Attribute* Op::find_attr(std::string_view n) const {
  for (const NamedAttribute& a : attrs)
    if (a.name == n) return &a.value;
  return nullptr;
}

int64_t Op::get_i64(std::string_view n, int64_t fallback) const {
  const IntAttr* a = attr<IntAttr>(n);
  return a ? a->value : fallback;
}

bool Op::get_bool(std::string_view n, bool fallback) const {
  const Attribute* a = find_attr(n);
  if (!a) return fallback;
  if (const bool* b = a->as<bool>()) return *b;
  if (a->is<UnitAttr>()) return true;
  return fallback;
}

std::vector<int64_t> Op::get_i64s(std::string_view n) const {
  const Attribute* a = find_attr(n);
  if (!a) return {};
  if (const I64ArrayAttr* arr = a->as<I64ArrayAttr>()) return arr->values;
  if (const DenseElementsAttr* d = a->as<DenseElementsAttr>()) {
    std::vector<int64_t> out;
    int64_t count = d->num_elements();
    for (int64_t i = 0; i < count; ++i) out.push_back(d->int_at(i));
    return out;
  }
  return {};
}

std::string read_conv_window(const Op& op, size_t spatial_dims, ConvWindow& out) {
  const size_t n = spatial_dims;
  auto or_ones = [&](std::vector<int64_t> v) { return v.empty() ? std::vector<int64_t>(n, 1) : v; };
  out.strides = or_ones(op.get_i64s("window_strides"));
  out.lhs_dilation = or_ones(op.get_i64s("lhs_dilation"));
  out.rhs_dilation = or_ones(op.get_i64s("rhs_dilation"));
  std::vector<int64_t> pad = op.get_i64s("padding");
  if (pad.empty()) pad.assign(2 * n, 0);
  out.reversal.clear();
  if (const auto* rev = op.attr<BoolArrayAttr>("window_reversal")) out.reversal = rev->values;
  if (out.reversal.empty()) out.reversal.assign(n, false);
  if (out.strides.size() != n || out.lhs_dilation.size() != n || out.rhs_dilation.size() != n ||
      pad.size() != 2 * n || out.reversal.size() != n)
    return "window attributes do not match the spatial rank";
  out.pad_lo.clear();
  out.pad_hi.clear();
  for (size_t d = 0; d < n; ++d) {
    out.pad_lo.push_back(pad[2 * d]);
    out.pad_hi.push_back(pad[2 * d + 1]);
    if (out.strides[d] < 1 || out.lhs_dilation[d] < 1 || out.rhs_dilation[d] < 1)
      return "strides and dilations must be positive";
  }
  return "";
}

std::string_view Op::get_string(std::string_view n) const {
  const Attribute* a = find_attr(n);
  if (!a) return {};
  if (const StringAttr* s = a->as<StringAttr>()) return s->value;
  if (const SymbolRefAttr* s = a->as<SymbolRefAttr>()) return s->name;
  return {};
}

int Op::get_enum(std::string_view n, int fallback) const {
  const EnumAttr* e = attr<EnumAttr>(n);
  return e ? e->value : fallback;
}

void Op::set_attr(std::string n, Attribute v) {
  for (NamedAttribute& a : attrs)
    if (a.name == n) {
      a.value = std::move(v);
      return;
    }
  attrs.push_back({std::move(n), std::move(v)});
}

Module::Module()
    : types_(std::make_unique<TypeArena>()),
      locations_(std::make_unique<std::deque<Location>>()),
      owned_(std::make_unique<std::deque<std::vector<uint8_t>>>()) {
  locations_->emplace_back();
  unknown_loc_ = &locations_->back();
  loc = unknown_loc_;
}

Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

const Func* Module::find_func(std::string_view n) const {
  for (const Func& f : funcs)
    if (f.name == n) return &f;
  return nullptr;
}

Func* Module::find_func(std::string_view n) {
  for (Func& f : funcs)
    if (f.name == n) return &f;
  return nullptr;
}

const Location* Module::intern_location(Location l) {
  if (!l.known()) return unknown_loc_;
  locations_->push_back(std::move(l));
  return &locations_->back();
}

std::span<const uint8_t> Module::own_bytes(std::vector<uint8_t> data) {
  owned_->push_back(std::move(data));
  return {owned_->back().data(), owned_->back().size()};
}

const Func* enclosing_func(const Module& m, const Op& op) {
  for (const Func& f : m.funcs) {
    bool found = false;
    walk(f.body, [&](const Op& o) { found = found || &o == &op; });
    if (found) return &f;
  }
  return nullptr;
}

}  // namespace jaxmlx::ir
