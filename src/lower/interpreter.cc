#include "lower/interpreter.h"

#include <exception>
#include <limits>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ir/printer.h"
#include "lower/dtypes.h"
#include "lower/emulated_types.h"
#include "mlx/mlx.h"

namespace jaxmlx::lower {
namespace {

// The largest value hoisted out of the runs (ProgramInfo::constant_ops), unless it is a view, and
// the most all of a program's hoisted values may hold (an unrolled loop over constants would
// otherwise keep every iteration's value: passes/unroll.h).
constexpr int64_t kMaxHoistedBytes = int64_t{1} << 20;
constexpr int64_t kMaxHoistedTotalBytes = int64_t{16} << 20;

bool is_terminator(const ir::Op& op) {
  return op.kind == ir::OpKind::kReturn || op.kind == ir::OpKind::kFuncReturn;
}

bool needs_host(ir::OpKind k) {
  using K = ir::OpKind;
  return k == K::kWhile || k == K::kCase || k == K::kIf ||
         k == K::kInfeed || k == K::kOutfeed || k == K::kSend || k == K::kRecv;
}

std::string where(const ir::Op& op) {
  std::string s(op.name());
  if (op.loc && op.loc->known()) s += " at " + op.loc->to_string();
  return s;
}

std::string shape_string(const mx::array& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.shape().size(); ++i) s += (i ? "," : "") + std::to_string(a.shape()[i]);
  std::ostringstream dt;
  dt << a.dtype();
  return s + "] " + dt.str();
}

void collect_funcs(const ir::Module& m, const ir::Func& f, std::vector<const ir::Func*>& out) {
  for (const ir::Func* g : out)
    if (g == &f) return;
  out.push_back(&f);
  ir::walk(f.body, [&](const ir::Op& op) {
    if (op.kind != ir::OpKind::kFuncCall) return;
    if (const ir::Func* callee = m.find_func(op.get_string("callee"))) collect_funcs(m, *callee, out);
  });
}

void add_region_uses(const ir::Op& op, std::vector<uint32_t>& uses) {
  for (const ir::Region& r : op.regions)
    ir::walk(r, [&](const ir::Op& inner) {
      for (const ir::Value& v : inner.operands) uses.push_back(v.id);
    });
}

void plan_releases(const ir::Block& b, ProgramInfo& info) {
  std::unordered_map<uint32_t, size_t> last;  // value defined here -> index of its last use
  const size_t n = b.ops.size();
  for (const ir::Value& a : b.args) last[a.id] = 0;
  for (size_t k = 0; k < n; ++k) {
    for (const ir::Value& r : b.ops[k].results) last[r.id] = k;
    std::vector<uint32_t> uses;
    for (const ir::Value& v : b.ops[k].operands) uses.push_back(v.id);
    add_region_uses(b.ops[k], uses);
    for (uint32_t id : uses) {
      auto it = last.find(id);
      if (it != last.end()) it->second = k;
    }
    for (const ir::Region& r : b.ops[k].regions)
      for (const ir::Block& inner : r.blocks) plan_releases(inner, info);
  }
  std::vector<std::vector<uint32_t>>& rel = info.releases[&b];
  rel.assign(n, {});
  if (n == 0) return;
  for (const auto& [id, k] : last) rel[k].push_back(id);
}

// Ops that compute their result from their operands alone, cheaply and without effects: when
// every operand is a constant (or hoisted), the op is hoisted (ProgramInfo::constant_ops). The
// bytes its value holds (0 for a view), or nullopt when it is not such an op.
std::optional<int64_t> hoistable_bytes(const ir::Op& op) {
  using K = ir::OpKind;
  if (op.results.size() != 1 || !op.regions.empty()) return std::nullopt;
  if (!ir::op_kind_is_elementwise(op.kind)) {
    switch (op.kind) {
      case K::kBitcastConvert: case K::kBroadcast: case K::kBroadcastInDim: case K::kConcatenate:
      case K::kIota: case K::kPad: case K::kReshape: case K::kReverse: case K::kSlice:
      case K::kTranspose:
        break;
      default:
        return std::nullopt;
    }
  }
  // A hoisted value lives as long as the executable: only small ones (a broadcast is a view of
  // its operand and costs nothing). Dynamic shapes are never hoisted.
  const ir::Type* t = op.results[0].type;
  if (t == nullptr || !t->ranked || t->is_token()) return std::nullopt;
  int64_t bytes = ir::element_storage_bytes(t->dtype);
  for (int64_t d : t->dims) {
    if (d < 0) return std::nullopt;
    bytes = d == 0 ? 0 : (bytes > (int64_t{1} << 40) / d ? (int64_t{1} << 40) : bytes * d);
  }
  if (op.kind == ir::OpKind::kBroadcastInDim || op.kind == ir::OpKind::kBroadcast) return 0;
  if (bytes > kMaxHoistedBytes) return std::nullopt;
  return bytes;
}

}  // namespace

mx::array empty_array(const mx::Shape& shape, mx::Dtype dtype) {
  const uint8_t* none = nullptr;
  return mx::array(none, shape, dtype);
}

ProgramInfo analyze_program(const ir::Module& m, const ir::Func& entry) {
  ProgramInfo info;
  info.module = &m;
  info.entry = &entry;
  std::vector<const ir::Func*> funcs;
  collect_funcs(m, entry, funcs);
  int64_t hoisted_bytes = 0;
  for (const ir::Func* f : funcs) {
    std::vector<const ir::Op*>& defs = info.defs[f];
    defs.assign(f->num_values, nullptr);
    std::unordered_map<uint32_t, size_t> constant_value;  // value id -> index in constant_ops
    ir::walk(f->body, [&](const ir::Op& op) {
      for (const ir::Value& r : op.results)
        if (r.id < defs.size()) defs[r.id] = &op;
      // Walk order is pre-order, so every operand's def (a dominating op) came first.
      bool constant = op.kind == ir::OpKind::kConstant;
      std::optional<int64_t> bytes = constant ? std::nullopt : hoistable_bytes(op);
      if (bytes && hoisted_bytes + *bytes <= kMaxHoistedTotalBytes) {
        ProgramInfo::Hoisted h{f, {}};
        for (const ir::Value& v : op.operands) {
          auto it = constant_value.find(v.id);
          if (it == constant_value.end()) break;
          h.operands.push_back(it->second);
        }
        if (h.operands.size() == op.operands.size()) {
          info.hoisted[&op] = std::move(h);
          hoisted_bytes += *bytes;
          constant = true;
        }
      }
      if (constant) {
        constant_value[op.results[0].id] = info.constant_ops.size();
        info.constant_index[&op] = info.constant_ops.size();
        info.constant_ops.push_back(&op);
      }
      if (needs_host(op.kind)) info.straight_line = false;
    });
    for (const ir::Block& b : f->body.blocks) plan_releases(b, info);
  }
  return info;
}

std::vector<std::string> find_unlowerable(const ir::Module& m, const ir::Func& entry,
                                          const Registry& registry) {
  std::vector<const ir::Func*> funcs;
  collect_funcs(m, entry, funcs);
  std::vector<std::string> missing;
  std::set<std::string> seen;
  for (const ir::Func* f : funcs)
    ir::walk(f->body, [&](const ir::Op& op) {
      if (is_terminator(op) || registry.find(op.kind)) return;
      std::string line = where(op);
      if (op.kind == ir::OpKind::kCustomCall)
        line = std::string(op.name()) + " @" + std::string(op.get_string("call_target_name")) +
               (op.loc && op.loc->known() ? " at " + op.loc->to_string() : "");
      if (seen.insert(line).second) missing.push_back(line);
    });
  return missing;
}

std::vector<std::string> find_oversized_dims(const ir::Module& m, const ir::Func& entry) {
  constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
  auto too_big = [](const ir::Type* t) -> int64_t {
    if (t == nullptr || !t->ranked || !t->is_tensor) return 0;
    for (int64_t d : t->dims)
      if (d > kMaxDim) return d;
    return 0;
  };
  std::vector<std::string> lines;
  for (size_t i = 0; i < entry.arg_types.size(); ++i)
    if (int64_t d = too_big(entry.arg_types[i]))
      lines.push_back("argument " + std::to_string(i) + " of @" + entry.name + ": dimension " +
                      std::to_string(d));
  std::vector<const ir::Func*> funcs;
  collect_funcs(m, entry, funcs);
  for (const ir::Func* f : funcs)
    ir::walk(f->body, [&](const ir::Op& op) {
      for (const ir::Value& r : op.results)
        if (int64_t d = too_big(r.type)) {
          lines.push_back(where(op) + ": dimension " + std::to_string(d));
          break;
        }
    });
  return lines;
}

Interpreter::Interpreter(const ProgramInfo& info, const Registry& registry, RunMode mode,
                         const Values* constants)
    : info_(info), registry_(registry), mode_(mode), constants_(constants) {}

StatusOr<Values> Interpreter::run(const ir::Func& f, const Values& args) {
  if (args.size() != f.args().size()) {
    return invalid_argument("@" + f.name + " takes " + std::to_string(f.args().size()) +
                            " arguments, got " + std::to_string(args.size()));
  }
  frames_.push_back(Frame{&f, std::vector<std::optional<mx::array>>(f.num_values)});
  for (size_t i = 0; i < args.size(); ++i) frames_.back().env[f.args()[i].id] = args[i];
  Values results;
  Status st = run_block(f.entry(), &results);
  frames_.pop_back();
  if (!st.ok()) return st;
  return results;
}

StatusOr<Values> Interpreter::run_region(const ir::Func& f, const ir::Region& region,
                                         const std::vector<std::pair<uint32_t, mx::array>>& bound,
                                         const Values& args) {
  frames_.push_back(Frame{&f, std::vector<std::optional<mx::array>>(f.num_values)});
  for (const auto& [id, a] : bound)
    if (id < f.num_values) frames_.back().env[id] = a;
  StatusOr<Values> out = call_region(region, args);
  frames_.pop_back();
  return out;
}

StatusOr<Values> Interpreter::call_loop_region(const ir::Region& region, const Values& args) {
  if (runner_ != nullptr && mode_ == RunMode::kExecute) {
    std::optional<StatusOr<Values>> out = runner_->run(*this, region, args);
    if (out) return std::move(*out);
  }
  return call_region(region, args);
}

StatusOr<Values> Interpreter::call_region(const ir::Region& region, const Values& args) {
  if (region.empty()) return internal_error("call_region on an empty region");
  const ir::Block& b = region.entry();
  if (b.args.size() != args.size()) {
    return internal_error("region takes " + std::to_string(b.args.size()) + " arguments, got " +
                          std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) frames_.back().env[b.args[i].id] = args[i];
  Values results;
  RETURN_IF_ERROR(run_block(b, &results));
  return results;
}

StatusOr<Values> Interpreter::call_func(std::string_view name, const Values& args) {
  const ir::Func* f = info_.module->find_func(name);
  if (f == nullptr) return not_found("func.call of an unknown function @" + std::string(name));
  if (frames_.size() > 256) return resource_exhausted("func.call nesting deeper than 256");
  return run(*f, args);
}

Status Interpreter::eval(const Values& arrays) {
  if (mode_ == RunMode::kTrace) {
    return failed_precondition("a value must be read on the host inside a compiled trace");
  }
  mx::eval(arrays);
  return Status();
}

const ir::Op* Interpreter::def(ir::Value v) const {
  if (frames_.empty()) return nullptr;
  auto it = info_.defs.find(frames_.back().func);
  if (it == info_.defs.end() || v.id >= it->second.size()) return nullptr;
  return it->second[v.id];
}

std::optional<int64_t> Interpreter::constant_int(ir::Value v) const {
  const ir::Op* op = def(v);
  if (op == nullptr || op->kind != ir::OpKind::kConstant) return std::nullopt;
  const auto* d = op->attr<ir::DenseElementsAttr>("value");
  if (d == nullptr || d->type == nullptr || d->num_elements() != 1) return std::nullopt;
  if (!ir::is_integer(d->type->dtype)) return std::nullopt;
  return d->int_at(0);
}

StatusOr<int64_t> Interpreter::read_scalar(const mx::array& a) {
  if (a.size() != 1) return internal_error("expected a scalar, got " + shape_string(a));
  mx::array v = mx::astype(mx::reshape(a, {}), mx::int64);
  RETURN_IF_ERROR(eval({v}));
  return v.item<int64_t>();
}

StatusOr<mx::array> Interpreter::get(ir::Value v) const {
  const Frame& fr = frames_.back();
  if (v.id >= fr.env.size() || !fr.env[v.id]) {
    return internal_error("value %" + std::to_string(v.id) + " is used before it is defined");
  }
  return *fr.env[v.id];
}

Status Interpreter::run_block(const ir::Block& block, Values* results) {
  auto rel = info_.releases.find(&block);
  const std::vector<std::vector<uint32_t>>* releases =
      rel == info_.releases.end() ? nullptr : &rel->second;
  for (size_t k = 0; k < block.ops.size(); ++k) {
    const ir::Op& op = block.ops[k];
    if (is_terminator(op)) {
      results->clear();
      for (const ir::Value& v : op.operands) {
        ASSIGN_OR_RETURN(mx::array a, get(v));
        results->push_back(std::move(a));
      }
    } else {
      RETURN_IF_ERROR(run_op(op));
    }
    if (releases && k < releases->size()) {
      std::vector<std::optional<mx::array>>& env = frames_.back().env;
      for (uint32_t id : (*releases)[k])
        if (id < env.size()) env[id].reset();
    }
    if (is_terminator(op)) return Status();
  }
  return Status();
}

Status Interpreter::run_op(const ir::Op& op) {
  StatusOr<Values> out = Values{};
  auto constant = constants_ != nullptr ? info_.constant_index.find(&op)
                                        : info_.constant_index.end();
  if (constant != info_.constant_index.end()) {
    out = Values{(*constants_)[constant->second]};
  } else {
    Values in;
    in.reserve(op.operands.size());
    for (const ir::Value& v : op.operands) {
      ASSIGN_OR_RETURN(mx::array a, get(v));
      in.push_back(std::move(a));
    }
    out = lower_op(op, in);
  }
  if (!out.ok()) {
    Status st = out.status();
    if (!op.regions.empty()) st.with_context("inside " + where(op));
    return st;
  }
  Frame& fr = frames_.back();
  for (size_t i = 0; i < op.results.size(); ++i) fr.env[op.results[i].id] = (*out)[i];
  return Status();
}

StatusOr<Values> Interpreter::lower_op_in(const ir::Func& f, const ir::Op& op, const Values& in) {
  frames_.push_back(Frame{&f, std::vector<std::optional<mx::array>>(f.num_values)});
  StatusOr<Values> out = lower_op(op, in);
  frames_.pop_back();
  return out;
}

StatusOr<Values> Interpreter::lower_op(const ir::Op& op, const Values& in) {
  const LowerFn* rule = registry_.find(op.kind);
  if (rule == nullptr) return unsupported(op, "no MLX lowering");
  StatusOr<Values> out = Values{};
  try {
    // Types MLX cannot compute in run the rule in a native type (emulated_types.h).
    out = apply_rule(*this, op, in, *rule);
  } catch (const std::bad_alloc&) {
    return resource_exhausted(where(op) + ": out of memory");
  } catch (const std::invalid_argument& e) {
    return invalid_argument(where(op) + ": " + e.what());
  } catch (const std::exception& e) {
    return internal_error(where(op) + ": " + e.what());
  }
  if (!out.ok()) return out;
  RETURN_IF_ERROR(check_results(op, *out));
  // An empty result never needs a kernel, and MLX's CUDA backend dies dividing by the size of an
  // empty output when it launches one (SIGFPE, measured on an H200 over the shape tests): it
  // becomes an array of no elements with nothing behind it.
  for (mx::array& a : *out)
    if (a.size() == 0 && a.has_primitive()) a = empty_array(a.shape(), a.dtype());
  return out;
}

Status Interpreter::check_results(const ir::Op& op, const Values& out) const {
  if (out.size() != op.results.size()) {
    return internal_error("the lowering of " + where(op) + " returned " +
                          std::to_string(out.size()) + " arrays for " +
                          std::to_string(op.results.size()) + " results");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const ir::Type* t = op.results[i].type;
    if (t == nullptr || t->is_tuple() || !t->ranked) continue;
    std::optional<mx::Dtype> want = t->is_token() ? mx::bool_ : storage_dtype(t->dtype);
    if (!want) continue;
    std::vector<int64_t> dims = t->is_token() ? std::vector<int64_t>{} : t->dims;
    if (int extra = storage_trailing_dim(t->dtype)) dims.push_back(extra);
    bool ok = out[i].dtype() == *want && out[i].ndim() == dims.size();
    for (size_t d = 0; ok && d < dims.size(); ++d)
      ok = dims[d] == ir::kDynamic || dims[d] == out[i].shape(static_cast<int>(d));
    if (!ok) {
      return internal_error("the lowering of " + where(op) + " returned " +
                            shape_string(out[i]) + " for result " + std::to_string(i) +
                            " of type " + ir::type_to_string(*t));
    }
  }
  return Status();
}

}  // namespace jaxmlx::lower
