// inline_calls: replaces func.call ops by the callee's body, callees first.
#include <functional>
#include <set>
#include <string>
#include <unordered_map>

#include "passes/passes.h"

namespace jaxmlx::passes {
namespace {

void remap_region(ir::Region& r, const ValueMap& map) {
  for (ir::Block& b : r.blocks) {
    for (ir::Value& v : b.args) v = map(v);
    for (ir::Op& op : b.ops) remap_op(op, map);
  }
}

}  // namespace

void remap_op(ir::Op& op, const ValueMap& map) {
  for (ir::Value& v : op.operands) v = map(v);
  for (ir::Value& v : op.results) v = map(v);
  for (ir::Region& r : op.regions) remap_region(r, map);
}

namespace {

class Inliner {
 public:
  explicit Inliner(ir::Module& m) : m_(m) {}

  Status run() {
    for (ir::Func& f : m_.funcs) RETURN_IF_ERROR(inline_func(f));
    drop_unused_funcs();
    return Status();
  }

 private:
  enum State { kTodo, kActive, kDone };

  Status inline_func(ir::Func& f) {
    State& st = state_[f.name];
    if (st == kDone) return Status();
    if (st == kActive) return Status();  // recursion: leave the call for the runtime
    st = kActive;
    std::unordered_map<uint32_t, ir::Value> subst;
    RETURN_IF_ERROR(inline_region(f, f.body, subst));
    replace_uses(f, subst);
    state_[f.name] = kDone;
    return Status();
  }

  Status inline_region(ir::Func& f, ir::Region& r,
                       std::unordered_map<uint32_t, ir::Value>& subst) {
    for (ir::Block& b : r.blocks) {
      std::vector<ir::Op> out;
      out.reserve(b.ops.size());
      for (ir::Op& op : b.ops) {
        for (ir::Region& nested : op.regions) RETURN_IF_ERROR(inline_region(f, nested, subst));
        if (op.kind != ir::OpKind::kFuncCall) {
          out.push_back(std::move(op));
          continue;
        }
        ir::Func* callee = m_.find_func(op.get_string("callee"));
        if (callee == nullptr || callee == &f) {
          out.push_back(std::move(op));
          continue;
        }
        RETURN_IF_ERROR(inline_func(*callee));
        if (state_[callee->name] != kDone || !splice(f, *callee, op, out, subst))
          out.push_back(std::move(op));
      }
      b.ops = std::move(out);
    }
    return Status();
  }

  // Appends a renumbered copy of callee's body (without its return) to `out`; records what
  // each call result becomes. False (nothing appended) when the shapes do not line up.
  bool splice(ir::Func& f, const ir::Func& callee, const ir::Op& call, std::vector<ir::Op>& out,
              std::unordered_map<uint32_t, ir::Value>& subst) {
    if (callee.body.blocks.size() != 1) return false;
    const ir::Block& body = callee.entry();
    if (body.ops.empty() || body.ops.back().kind != ir::OpKind::kFuncReturn) return false;
    if (body.args.size() != call.operands.size()) return false;
    if (body.ops.back().operands.size() != call.results.size()) return false;
    std::unordered_map<uint32_t, ir::Value> args;
    for (size_t i = 0; i < body.args.size(); ++i) args[body.args[i].id] = call.operands[i];
    const uint32_t base = f.num_values;
    ValueMap map = [&](ir::Value v) {
      auto it = args.find(v.id);
      if (it != args.end()) return it->second;
      return ir::Value{base + v.id, v.type};
    };
    for (size_t i = 0; i + 1 < body.ops.size(); ++i) {
      out.push_back(body.ops[i]);
      remap_op(out.back(), map);
      adopt_call_location(out.back(), call.loc);
    }
    const ir::Op& ret = body.ops.back();
    for (size_t i = 0; i < call.results.size(); ++i)
      subst[call.results[i].id] = map(ret.operands[i]);
    f.num_values = base + callee.num_values;
    return true;
  }

  // Ops of a jitted helper (jnp.fft.fft is one) carry only a name scope; the user's file and
  // line are on the call. Give such ops the call's frame so errors point at the user's code.
  void adopt_call_location(ir::Op& op, const ir::Location* call_loc) {
    if (call_loc == nullptr || call_loc->file.empty()) return;
    if (op.loc == nullptr || op.loc->file.empty()) {
      ir::Location loc = *call_loc;
      if (op.loc != nullptr && !op.loc->name.empty()) {
        loc.name = loc.name.empty() ? op.loc->name : loc.name + "/" + op.loc->name;
      }
      op.loc = m_.intern_location(std::move(loc));
    }
    for (ir::Region& r : op.regions)
      for (ir::Block& b : r.blocks)
        for (ir::Op& nested : b.ops) adopt_call_location(nested, call_loc);
  }

  void collect_refs(const ir::Region& r, std::set<std::string>& refs) {
    ir::walk(r, [&](const ir::Op& op) {
      if (op.kind == ir::OpKind::kFuncCall) refs.insert(std::string(op.get_string("callee")));
      for (const ir::NamedAttribute& a : op.attrs) collect_symbols(a.value, refs);
    });
  }

  void collect_symbols(const ir::Attribute& a, std::set<std::string>& refs) {
    if (const auto* s = a.as<ir::SymbolRefAttr>()) refs.insert(s->name);
    if (const auto* arr = a.as<ir::ArrayAttr>())
      for (const ir::Attribute& item : arr->items) collect_symbols(item, refs);
  }

  void drop_unused_funcs() {
    std::set<std::string> refs;
    for (const ir::Func& f : m_.funcs)
      if (f.visibility == ir::Visibility::kPublic || f.name == "main") collect_refs(f.body, refs);
    // Calls left in place (recursion) may reach private funcs: keep the closure.
    for (bool grew = true; grew;) {
      grew = false;
      for (const ir::Func& f : m_.funcs) {
        if (!refs.count(f.name)) continue;
        size_t before = refs.size();
        collect_refs(f.body, refs);
        grew |= refs.size() != before;
      }
    }
    std::vector<ir::Func> kept;
    for (ir::Func& f : m_.funcs)
      if (f.visibility == ir::Visibility::kPublic || f.name == "main" || refs.count(f.name))
        kept.push_back(std::move(f));
    m_.funcs = std::move(kept);
  }

  ir::Module& m_;
  std::unordered_map<std::string, State> state_;
};

}  // namespace

Status inline_calls(ir::Module& m) { return Inliner(m).run(); }

}  // namespace jaxmlx::passes
