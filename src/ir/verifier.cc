#include "ir/verifier.h"

#include <vector>

#include "ir/printer.h"

namespace jaxmlx::ir {
namespace {

// The most elements a dense attribute other than a constant's value may have.
constexpr int64_t kMaxAttributeElements = int64_t{1} << 20;

class Verifier {
 public:
  explicit Verifier(const Func& f) : func_(f), defined_(f.num_values, false) {}

  Status run() {
    if (func_.body.empty()) return Status();  // a declaration
    if (func_.body.blocks.size() != 1)
      return fail_func("a func body must have exactly one block");
    const Block& entry = func_.entry();
    if (entry.args.size() != func_.arg_types.size())
      return fail_func("entry block has " + std::to_string(entry.args.size()) +
                       " arguments, the signature " + std::to_string(func_.arg_types.size()));
    for (size_t i = 0; i < entry.args.size(); ++i)
      if (entry.args[i].type != func_.arg_types[i])
        return fail_func("argument " + std::to_string(i) + " type differs from the signature");
    RETURN_IF_ERROR(region(func_.body, /*in_func=*/true));
    const Op& ret = entry.ops.back();
    if (ret.operands.size() != func_.result_types.size())
      return fail(ret, "returns " + std::to_string(ret.operands.size()) + " values, the func " +
                           std::to_string(func_.result_types.size()));
    for (size_t i = 0; i < ret.operands.size(); ++i)
      if (ret.operands[i].type != func_.result_types[i])
        return fail(ret, "result " + std::to_string(i) + " type differs from the signature");
    return Status();
  }

 private:
  Status region(const Region& r, bool in_func) {
    size_t mark = scope_.size();
    for (const Block& b : r.blocks) {
      for (const Value& v : b.args) RETURN_IF_ERROR(define(v, nullptr));
      for (const Op& o : b.ops) RETURN_IF_ERROR(op(o));
      if (b.ops.empty()) return fail_func("empty block in a region");
      OpKind want = in_func ? OpKind::kFuncReturn : OpKind::kReturn;
      OpKind last = b.ops.back().kind;
      if (last != want && last != OpKind::kGeneric)
        return fail(b.ops.back(), std::string("a block must end in ") +
                                      std::string(op_kind_name(want)));
    }
    // Values of this region go out of scope for ops after the owning op.
    for (size_t i = mark; i < scope_.size(); ++i) defined_[scope_[i]] = false;
    scope_.resize(mark);
    return Status();
  }

  Status op(const Op& o) {
    RETURN_IF_ERROR(counts(o));
    for (const NamedAttribute& a : o.attrs) RETURN_IF_ERROR(attribute(o, a.name, a.value));
    for (const Value& v : o.operands) {
      if (v.id >= defined_.size() || !defined_[v.id])
        return fail(o, "uses %" + std::to_string(v.id) + " before its definition");
      if (!v.type) return fail(o, "operand without a type");
      // Lowering rules read an operand's type at its use, the interpreter hands them the value
      // its definition made: the two must agree.
      if (v.type != types_[v.id] && !(*v.type == *types_[v.id]))
        return fail(o, "uses %" + std::to_string(v.id) + " as " + type_to_string(*v.type) +
                           ", defined as " + type_to_string(*types_[v.id]));
    }
    for (const Region& r : o.regions) RETURN_IF_ERROR(region(r, false));
    for (const Value& v : o.results) RETURN_IF_ERROR(define(v, &o));
    return Status();
  }

  Status counts(const Op& o) {
    auto check = [&](int want, size_t have, const char* what) -> Status {
      if (want >= 0 && static_cast<size_t>(want) != have)
        return fail(o, "has " + std::to_string(have) + " " + what + ", expected " +
                           std::to_string(want));
      return Status();
    };
    RETURN_IF_ERROR(check(op_kind_num_operands(o.kind), o.operands.size(), "operands"));
    RETURN_IF_ERROR(check(op_kind_num_results(o.kind), o.results.size(), "results"));
    RETURN_IF_ERROR(check(op_kind_num_regions(o.kind), o.regions.size(), "regions"));
    return variadic_operands(o);
  }

  // The operand lists of variadic ops that the lowerings index into: at least the operands the
  // spec's signature names, and inputs paired with init values (reduce) or updates (scatter).
  Status variadic_operands(const Op& o) {
    const size_t n = o.operands.size();
    auto at_least = [&](size_t want, const char* what) -> Status {
      if (n < want)
        return fail(o, "has " + std::to_string(n) + " operands, expected at least " +
                           std::to_string(want) + " (" + what + ")");
      return Status();
    };
    switch (o.kind) {
      case OpKind::kConcatenate: return at_least(1, "an input");
      case OpKind::kSort: return at_least(1, "an input");
      case OpKind::kDynamicSlice: return at_least(1, "the operand");
      case OpKind::kDynamicUpdateSlice: return at_least(2, "the operand and the update");
      case OpKind::kReduce:
      case OpKind::kReduceWindow:
        RETURN_IF_ERROR(at_least(2, "an input and its init value"));
        if (n % 2 != 0) return fail(o, "has an odd number of operands: inputs and init values pair");
        return Status();
      case OpKind::kScatter:
        RETURN_IF_ERROR(at_least(3, "an input, the indices and an update"));
        if (n % 2 != 1) return fail(o, "has an even number of operands: inputs and updates pair");
        return Status();
      default: return Status();
    }
  }

  // Dense elements hold the data their type says (one element for a splat). Only a constant's
  // value may be large: other attributes (paddings, dims, groups) are read into vectors of
  // their elements, and a splat typed with 2^40 of them would ask for terabytes.
  Status attribute(const Op& o, const std::string& name, const Attribute& a) {
    if (const auto* arr = a.as<ArrayAttr>()) {
      for (const Attribute& item : arr->items) RETURN_IF_ERROR(attribute(o, name, item));
    } else if (const auto* dict = a.as<DictAttr>()) {
      for (const NamedAttribute& e : dict->entries) RETURN_IF_ERROR(attribute(o, name, e.value));
    } else if (const auto* d = a.as<DenseElementsAttr>()) {
      const int64_t n = d->type ? d->type->num_elements() : -1;
      const int bytes = d->type ? element_storage_bytes(d->type->dtype) : 0;
      size_t want = 0;
      if (n < 0 || bytes <= 0 ||
          __builtin_mul_overflow(static_cast<size_t>(d->splat ? 1 : n),
                                 static_cast<size_t>(bytes), &want) ||
          d->data.size() != want)
        return fail(o, "attribute " + name + ": dense data does not fit its type");
      if (name != "value" && n > kMaxAttributeElements)
        return fail(o, "attribute " + name + " has " + std::to_string(n) + " elements");
    }
    return Status();
  }

  Status define(const Value& v, const Op* o) {
    if (v.id >= defined_.size())
      return o ? fail(*o, "defines %" + std::to_string(v.id) + " beyond num_values")
               : fail_func("block argument %" + std::to_string(v.id) + " beyond num_values");
    if (!v.type)
      return o ? fail(*o, "result without a type") : fail_func("block argument without a type");
    if (defined_[v.id] || ever_[v.id])
      return o ? fail(*o, "redefines %" + std::to_string(v.id))
               : fail_func("block argument redefines %" + std::to_string(v.id));
    defined_[v.id] = true;
    ever_[v.id] = true;
    types_[v.id] = v.type;
    scope_.push_back(v.id);
    return Status();
  }

  Status fail(const Op& o, const std::string& msg) {
    return invalid_argument("verifier: in @" + func_.name + ": " + describe_op(o) + ": " + msg);
  }
  Status fail_func(const std::string& msg) {
    return invalid_argument("verifier: in @" + func_.name + ": " + msg);
  }

  const Func& func_;
  std::vector<bool> defined_;
  std::vector<bool> ever_ = std::vector<bool>(defined_.size(), false);
  std::vector<const Type*> types_ = std::vector<const Type*>(defined_.size(), nullptr);
  std::vector<uint32_t> scope_;
};

}  // namespace

Status verify_func(const Func& f) { return Verifier(f).run(); }

Status verify(const Module& m) {
  for (const Func& f : m.funcs) RETURN_IF_ERROR(verify_func(f));
  return Status();
}

}  // namespace jaxmlx::ir
