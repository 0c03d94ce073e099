#include "vhlo/read.h"

#include <string>
#include <unordered_map>

#include "bytecode/reader.h"
#include "vhlo/convert.h"
#include "vhlo/dialect.h"
#include "vhlo/ops.h"
#include "vhlo/version.h"

namespace jaxmlx::vhlo {
namespace {

using bytecode::AttrId;
using bytecode::kNone;

constexpr std::string_view kProducerPrefix = "StableHLO_v";

// Parses "X.Y.Z" (digits only); false if malformed.
bool parse_version(std::string_view s, std::array<int, 3>& out) {
  int part = 0;
  out = {0, 0, 0};
  bool digit = false;
  for (char ch : s) {
    if (ch == '.') {
      if (!digit || ++part > 2) return false;
      digit = false;
    } else if (ch >= '0' && ch <= '9') {
      if (out[part] > 100000) return false;
      out[part] = out[part] * 10 + (ch - '0');
      digit = true;
    } else {
      return false;
    }
  }
  return digit && part == 2;
}

// Reads the artifact's target version from the bytecode header (magic, version, producer) and
// refuses versions outside [kMin, kMax] before anything else is parsed.
StatusOr<std::array<int, 3>> check_header(std::span<const uint8_t> data, std::string& producer) {
  bytecode::EncodingReader r(data, 0, "header");
  static constexpr uint8_t kMagic[] = {'M', 'L', 0xEF, 'R'};
  for (uint8_t m : kMagic) {
    auto b = r.read_byte();
    if (!b.ok() || *b != m) return invalid_argument("not MLIR bytecode (bad magic number)");
  }
  RETURN_IF_ERROR(r.read_varint().status());
  ASSIGN_OR_RETURN(std::string_view p, r.read_cstring());
  producer = std::string(p);
  size_t pos = p.find(kProducerPrefix);
  std::array<int, 3> v;
  if (pos == std::string_view::npos || !parse_version(p.substr(pos + kProducerPrefix.size()), v))
    return invalid_argument("not a StableHLO portable artifact (producer \"" + producer + "\")");
  if (v > kMaxStableHloVersion)
    return invalid_argument("portable artifact targets StableHLO " + version_string(v) +
                            "; this plugin reads up to " + version_string(kMaxStableHloVersion));
  if (v < kMinStableHloVersion)
    return invalid_argument("portable artifact targets StableHLO " + version_string(v) +
                            "; the oldest supported is " + version_string(kMinStableHloVersion));
  return v;
}

class ModuleBuilder {
 public:
  ModuleBuilder(bytecode::Reader& r, ir::Module& m)
      : r_(r), m_(m), conv_(r, m), local_(r.ir().values.size(), ir::Value::kNone) {}

  Status build() {
    const bytecode::Ir& ir = r_.ir();
    if (ir.top == kNone || ir.blocks[ir.top].ops.size() != 1)
      return invalid_argument("vhlo: expected one top-level builtin.module");
    const bytecode::Op& mod = ir.ops[ir.blocks[ir.top].ops[0]];
    if (r_.op_name(mod).full_name != "builtin.module")
      return invalid_argument("vhlo: top-level op is " + r_.op_name(mod).full_name);
    m_.loc = conv_.location(mod.loc);
    RETURN_IF_ERROR(module_attrs(ir.ops[ir.blocks[ir.top].ops[0]], ir.blocks[ir.top].ops[0]));
    if (mod.regions.size() != 1) return invalid_argument("vhlo: module without a body");
    const bytecode::Region& body = ir.regions[mod.regions[0]];
    for (bytecode::BlockId b : body.blocks)
      for (bytecode::OpId id : ir.blocks[b].ops) {
        const bytecode::Op& op = ir.ops[id];
        if (r_.op_name(op).full_name == "vhlo.func_v1") {
          Status st = func(op, id);
          if (!st.ok()) return st;
        } else {
          next_id_ = 0;
          ++scope_;
          ASSIGN_OR_RETURN(ir::Op o, convert_op(op, id, /*parent_is_func=*/false));
          m_.other_ops.push_back(std::move(o));
        }
      }
    return Status();
  }

 private:
  Status module_attrs(const bytecode::Op& mod, bytecode::OpId id) {
    if (mod.props.kind == bytecode::Properties::Kind::kNative) {
      // builtin.module's properties: optional sym_name, optional sym_visibility (sorted).
      ASSIGN_OR_RETURN(bytecode::DialectReader pr, r_.properties_reader(id));
      for (std::string_view name : {"sym_name", "sym_visibility"}) {
        ASSIGN_OR_RETURN(auto opt, pr.read_varint_with_flag());
        if (!opt.second) continue;
        ASSIGN_OR_RETURN(std::string s, conv_.string_value(static_cast<AttrId>(opt.first), name));
        if (name == "sym_name") m_.name = s;
      }
    }
    RawAttrs raw;
    RETURN_IF_ERROR(dictionary(mod.attrs, raw));
    if (mod.props.kind == bytecode::Properties::Kind::kAttribute)
      RETURN_IF_ERROR(dictionary(mod.props.attr, raw));
    for (auto& [name, aid] : raw) {
      if (name == "sym_name") {
        ASSIGN_OR_RETURN(m_.name, conv_.string_value(aid, name));
        continue;
      }
      ASSIGN_OR_RETURN(ir::Attribute v, conv_.attr(aid));
      m_.attrs.push_back({name, std::move(v)});
    }
    return Status();
  }

  // Appends the entries of dictionary attribute `id` (builtin or vhlo dict) to `raw`.
  Status dictionary(AttrId id, RawAttrs& raw) {
    if (id == kNone) return Status();
    ASSIGN_OR_RETURN(const bytecode::Attribute* a, r_.attr(id));
    if (a->kind == bytecode::AttrKind::kDictionary) {
      for (const bytecode::NamedAttr& n : a->named) raw.emplace_back(std::string(n.name), n.value);
      return Status();
    }
    if (const VhloAttr* v = as_vhlo(a); v && v->code == AttrCode::kDictionary) {
      for (const auto& [k, val] : v->entries) {
        ASSIGN_OR_RETURN(std::string name, conv_.string_value(k, "dictionary key"));
        raw.emplace_back(std::move(name), val);
      }
      return Status();
    }
    return invalid_argument("vhlo: op attributes are not a dictionary");
  }

  // The op's attributes: native properties (v5+, in ODS order), then its dictionary.
  StatusOr<RawAttrs> raw_attrs(const bytecode::Op& op, bytecode::OpId id,
                               const VhloOpInfo* info) {
    RawAttrs raw;
    if (op.props.kind == bytecode::Properties::Kind::kNative && !info) {
      foreign_properties(op, id, raw);
    } else if (op.props.kind == bytecode::Properties::Kind::kNative) {
      ASSIGN_OR_RETURN(bytecode::DialectReader pr, r_.properties_reader(id));
      for (std::string_view name : info->sorted_attrs) {
        ASSIGN_OR_RETURN(AttrId aid, pr.read_attr_id());
        raw.emplace_back(std::string(name), aid);
      }
      if (!pr.stream().empty()) return pr.error("trailing bytes in op properties");
    } else if (op.props.kind == bytecode::Properties::Kind::kAttribute) {
      RETURN_IF_ERROR(dictionary(op.props.attr, raw));
    }
    RETURN_IF_ERROR(dictionary(op.attrs, raw));
    return raw;
  }

  // Native properties of a few other-dialect ops jax emits (their ODS attributes, sorted, all
  // required). Anything else, or a blob that does not fit, is kept as an opaque "properties".
  void foreign_properties(const bytecode::Op& op, bytecode::OpId id, RawAttrs& raw) {
    static const std::unordered_map<std::string_view, std::vector<std::string_view>> kKnown = {
        {"sdy.mesh", {"mesh", "sym_name"}},
        {"sdy.sharding_constraint", {"sharding"}},
        {"sdy.reshard", {"sharding"}},
    };
    auto it = kKnown.find(r_.op_name(op).full_name);
    auto pr = r_.properties_reader(id);
    if (it != kKnown.end() && pr.ok()) {
      RawAttrs decoded;
      bool ok = true;
      for (std::string_view name : it->second) {
        auto aid = pr->read_attr_id();
        if (!aid.ok()) { ok = false; break; }
        decoded.emplace_back(std::string(name), *aid);
      }
      if (ok && pr->stream().empty()) {
        raw.insert(raw.end(), decoded.begin(), decoded.end());
        return;
      }
    }
    raw.emplace_back("properties", kNone);  // placeholder, see convert_op
  }

  Status func(const bytecode::Op& op, bytecode::OpId id) {
    const VhloOpInfo* info = find_vhlo_op("func_v1");
    ASSIGN_OR_RETURN(RawAttrs raw, raw_attrs(op, id, info));
    ir::Func f;
    f.loc = conv_.location(op.loc);
    for (auto& [name, aid] : raw) {
      if (name == "sym_name") {
        ASSIGN_OR_RETURN(f.name, conv_.string_value(aid, name));
      } else if (name == "sym_visibility") {
        ASSIGN_OR_RETURN(std::string vis, conv_.string_value(aid, name));
        f.visibility = vis == "private"  ? ir::Visibility::kPrivate
                       : vis == "nested" ? ir::Visibility::kNested
                                         : ir::Visibility::kPublic;
      } else if (name == "function_type") {
        ASSIGN_OR_RETURN(const VhloAttr* ta, conv_.vhlo_attr(aid, name));
        ASSIGN_OR_RETURN(const ir::Type* t, conv_.type(ta->type));
        if (ta->code != AttrCode::kType || t->dtype != ir::ElementType::kFunction)
          return invalid_argument("vhlo: func function_type is not a function type");
        f.arg_types = t->members;
        f.result_types = t->results;
      } else if (name == "arg_attrs" || name == "res_attrs") {
        ASSIGN_OR_RETURN(ir::Attribute v, conv_.attr(aid));
        std::vector<ir::DictAttr>& dst = name == "arg_attrs" ? f.arg_attrs : f.result_attrs;
        if (const ir::ArrayAttr* arr = v.as<ir::ArrayAttr>())
          for (const ir::Attribute& item : arr->items)
            dst.push_back(item.as<ir::DictAttr>() ? *item.as<ir::DictAttr>() : ir::DictAttr{});
      } else {
        ASSIGN_OR_RETURN(ir::Attribute v, conv_.attr(aid));
        f.attrs.push_back({name, std::move(v)});
      }
    }
    next_id_ = 0;
    ++scope_;
    if (op.regions.size() != 1) return invalid_argument("vhlo: func without one region");
    Status st = region(op.regions[0], /*in_func=*/true, f.body);
    if (!st.ok()) return st.with_context("in func @" + f.name);
    f.num_values = next_id_;
    m_.funcs.push_back(std::move(f));
    return Status();
  }

  Status region(bytecode::RegionId rid, bool in_func, ir::Region& out) {
    if (++depth_ > kMaxDepth) return invalid_argument("vhlo: regions nested too deeply");
    const bytecode::Ir& ir = r_.ir();
    for (bytecode::BlockId bid : ir.regions[rid].blocks) {
      ir::Block& blk = out.blocks.emplace_back();
      for (bytecode::ValueId v : ir.blocks[bid].args) {
        ASSIGN_OR_RETURN(ir::Value val, define(v));
        blk.args.push_back(val);
      }
      for (bytecode::OpId oid : ir.blocks[bid].ops) {
        ASSIGN_OR_RETURN(bool folded, fold_identity_cast(ir.ops[oid]));
        if (folded) continue;
        ASSIGN_OR_RETURN(ir::Op o, convert_op(ir.ops[oid], oid, in_func));
        blk.ops.push_back(std::move(o));
      }
    }
    --depth_;
    return Status();
  }

  // VHLO mixed with other dialects carries builtin.unrealized_conversion_cast ops between
  // them; where each result has its operand's type the cast is an identity and is dropped, as
  // StableHLO's deserializer reconciles them.
  StatusOr<bool> fold_identity_cast(const bytecode::Op& op) {
    if (r_.op_name(op).full_name != "builtin.unrealized_conversion_cast" ||
        op.operands.size() != op.results.size() || !op.regions.empty())
      return false;
    const auto& values = r_.ir().values;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      ASSIGN_OR_RETURN(const ir::Type* a, conv_.type(values[op.operands[i]].type));
      ASSIGN_OR_RETURN(const ir::Type* b, conv_.type(values[op.results[i]].type));
      if (a != b) return false;
    }
    for (size_t i = 0; i < op.operands.size(); ++i) {
      ASSIGN_OR_RETURN(ir::Value v, use(op.operands[i]));
      local_[op.results[i]] = v.id;
      owner_[op.results[i]] = scope_;
    }
    return true;
  }

  StatusOr<ir::Value> define(bytecode::ValueId v) {
    ASSIGN_OR_RETURN(const ir::Type* t, conv_.type(r_.ir().values[v].type));
    local_[v] = next_id_++;
    owner_[v] = scope_;
    return ir::Value{local_[v], t};
  }

  StatusOr<ir::Value> use(bytecode::ValueId v) {
    if (local_[v] == ir::Value::kNone || owner_[v] != scope_)
      return invalid_argument("vhlo: value used outside the function that defines it");
    ASSIGN_OR_RETURN(const ir::Type* t, conv_.type(r_.ir().values[v].type));
    return ir::Value{local_[v], t};
  }

  StatusOr<ir::Op> convert_op(const bytecode::Op& op, bytecode::OpId id, bool parent_is_func) {
    const bytecode::OpName& name = r_.op_name(op);
    ir::Op o;
    o.loc = conv_.location(op.loc);
    const VhloOpInfo* info = nullptr;
    if (name.full_name.rfind("vhlo.", 0) == 0) {
      info = find_vhlo_op(name.name);
      if (!info) return unimplemented("unknown VHLO op " + name.full_name);
      o.kind = info->kind;
      if (o.kind == ir::OpKind::kReturn && parent_is_func) o.kind = ir::OpKind::kFuncReturn;
    } else {
      o.kind = ir::OpKind::kGeneric;
      o.generic_name = name.full_name;
    }
    for (bytecode::ValueId v : op.operands) {
      ASSIGN_OR_RETURN(ir::Value val, use(v));
      o.operands.push_back(val);
    }
    ASSIGN_OR_RETURN(RawAttrs raw, raw_attrs(op, id, info));
    if (info) {
      auto attrs = convert_op_attributes(conv_, *info, raw);
      if (!attrs.ok())
        return Status(attrs.status()).with_context("in " + name.full_name + " at " +
                                                    o.loc->to_string());
      o.attrs = std::move(attrs).value();
    } else {
      for (auto& [n, aid] : raw) {
        if (aid == kNone) {  // undecodable native properties
          o.attrs.push_back({n, ir::OpaqueAttr{"properties", "", op.props.bytes}});
          continue;
        }
        ASSIGN_OR_RETURN(ir::Attribute v, conv_.attr(aid));
        o.attrs.push_back({n, std::move(v)});
      }
    }
    for (bytecode::RegionId rid : op.regions) {
      ir::Region& reg = o.regions.emplace_back();
      RETURN_IF_ERROR(region(rid, /*in_func=*/false, reg));
    }
    for (bytecode::ValueId v : op.results) {
      ASSIGN_OR_RETURN(ir::Value val, define(v));
      o.results.push_back(val);
    }
    return o;
  }

  static constexpr int kMaxDepth = 512;
  bytecode::Reader& r_;
  ir::Module& m_;
  Converter conv_;
  std::vector<uint32_t> local_;  // bytecode ValueId -> id within the current func
  std::vector<uint32_t> owner_ = std::vector<uint32_t>(local_.size(), 0);  // scope_ at definition
  uint32_t scope_ = 0;           // one per func / top-level op: values never cross them
  uint32_t next_id_ = 0;
  int depth_ = 0;
};

}  // namespace

StatusOr<ir::Module> read_portable_artifact(std::span<const uint8_t> data,
                                            std::shared_ptr<const void> keep_alive) {
  std::string producer;
  ASSIGN_OR_RETURN(auto version, check_header(data, producer));
  ASSIGN_OR_RETURN(std::unique_ptr<bytecode::Reader> reader,
                   bytecode::Reader::parse(data, keep_alive));
  reader->register_hook("vhlo", std::make_shared<VhloHook>());
  ir::Module m;
  m.producer = producer;
  for (int i = 0; i < 3; ++i) m.version[i] = version[i];
  if (keep_alive) m.keep_alive(std::move(keep_alive));
  ModuleBuilder b(*reader, m);
  RETURN_IF_ERROR(b.build());
  return m;
}

StatusOr<ir::Module> read_portable_artifact(std::shared_ptr<const std::vector<uint8_t>> bytes) {
  if (!bytes) return invalid_argument("read_portable_artifact: null input");
  std::span<const uint8_t> data(bytes->data(), bytes->size());
  return read_portable_artifact(data, std::shared_ptr<const void>(bytes));
}

}  // namespace jaxmlx::vhlo
