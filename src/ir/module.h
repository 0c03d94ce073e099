// Our program IR: Module -> Func -> Region -> Block -> Op, with SSA values numbered per Func.
//
// How lowering code walks a module:
//
//   const ir::Func* main = module.find_func("main");
//   std::vector<mx::array> env(main->num_values);      // one slot per SSA value of the func
//   for (size_t i = 0; i < main->args().size(); ++i) env[main->args()[i].id] = inputs[i];
//   for (const ir::Op& op : main->entry().ops) {        // regions nest: op.regions[r].blocks[b]
//     switch (op.kind) { case ir::OpKind::kAdd: ... env[op.results[0].id] = ...; }
//     // attributes: op.attr<ir::I64ArrayAttr>("permutation"), op.get_i64("dimension"), ...
//   }
//
// Value ids are unique within a Func, across all nested regions (StableHLO regions may use
// values defined outside them). Ownership: the Module owns everything, including the input
// bytes that dense constants view; Ops/Funcs are plain values inside it. A Module is movable,
// not copyable; pointers to its Types and Locations stay valid across moves. Not thread-safe
// to mutate; concurrent readers are fine.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attributes.h"
#include "ir/types.h"

namespace jaxmlx::ir {

enum class OpKind : uint16_t {
#define OP(kind, name, nops, nres, nreg, ew) kind,
#include "ir/ops.def"
#undef OP
};
inline constexpr int kNumOpKinds = 0
#define OP(kind, name, nops, nres, nreg, ew) +1
#include "ir/ops.def"
#undef OP
    ;

std::string_view op_kind_name(OpKind k);  // "stablehlo.add"; "" for kGeneric
// Fixed counts from ops.def (-1: variadic).
int op_kind_num_operands(OpKind k);
int op_kind_num_results(OpKind k);
int op_kind_num_regions(OpKind k);
// Computes result element i from element i of each operand alone (ops.def's last column): the
// arithmetic, logical, comparison, conversion and transcendental ops, and select.
bool op_kind_is_elementwise(OpKind k);
// The kind for a textual name ("stablehlo.add" -> kAdd); kGeneric when unknown.
OpKind op_kind_from_name(std::string_view name);

// Source location of an op, reduced to what errors show: the user's frame (file:line:col) and
// the name scope jax attaches ("jit(f)/jit(main)/add"). Empty file means unknown.
struct Location {
  std::string file;
  int line = 0;
  int col = 0;
  std::string name;
  bool known() const { return !file.empty() || !name.empty(); }
  std::string to_string() const;  // "jit(f)/add  model.py:42:7"
};

// An SSA value: its number within the Func and its type (owned by the Module's TypeArena).
struct Value {
  static constexpr uint32_t kNone = 0xffffffffu;
  uint32_t id = kNone;
  const Type* type = nullptr;
  bool operator==(const Value& o) const { return id == o.id; }
};

struct Op;

struct Block {
  std::vector<Value> args;
  std::vector<Op> ops;
};

struct Region {
  std::vector<Block> blocks;
  bool empty() const { return blocks.empty(); }
  const Block& entry() const { return blocks.front(); }
};

struct Op {
  OpKind kind = OpKind::kGeneric;
  std::vector<Value> operands;
  std::vector<Value> results;
  std::vector<NamedAttribute> attrs;
  std::vector<Region> regions;
  const Location* loc = nullptr;  // never null in a read Module (points to an unknown location)
  std::string generic_name;       // the full op name when kind == kGeneric ("sdy.mesh")

  std::string_view name() const;  // "stablehlo.add", or generic_name

  const Attribute* find_attr(std::string_view n) const;
  template <typename T>
  const T* attr(std::string_view n) const {
    const Attribute* a = find_attr(n);
    return a ? a->as<T>() : nullptr;
  }
  // Convenience getters with a fallback when the attribute is absent or of another kind.
  int64_t get_i64(std::string_view n, int64_t fallback = 0) const;
  bool get_bool(std::string_view n, bool fallback = false) const;
  std::vector<int64_t> get_i64s(std::string_view n) const;  // I64ArrayAttr or int dense elements
  std::string_view get_string(std::string_view n) const;
  // Enum value as int (compare with static_cast<int>(ir::Precision::kHigh)); fallback if absent.
  int get_enum(std::string_view n, int fallback = 0) const;
  void set_attr(std::string n, Attribute v);
};

// A convolution's window attributes, one entry per spatial dim, StableHLO's defaults filled in
// for absent ones (strides and dilations 1, no padding, no reversal).
struct ConvWindow {
  std::vector<int64_t> strides, lhs_dilation, rhs_dilation, pad_lo, pad_hi;
  std::vector<bool> reversal;
};
// Reads them for `spatial_dims` dims into `out`: "" when they are well formed, else what is
// wrong (a list of another length, a stride or dilation below 1). Lowering and cost analysis
// read a convolution's window through this one reader.
std::string read_conv_window(const Op& op, size_t spatial_dims, ConvWindow& out);

enum class Visibility : uint8_t { kPublic, kPrivate, kNested };

struct Func {
  std::string name;
  Visibility visibility = Visibility::kPublic;
  std::vector<const Type*> arg_types;
  std::vector<const Type*> result_types;
  std::vector<DictAttr> arg_attrs;     // per argument; empty when the func has none
  std::vector<DictAttr> result_attrs;  // per result; empty when the func has none
  std::vector<NamedAttribute> attrs;   // other func attributes (discardable ones)
  Region body;                         // one block; its args are the func arguments
  const Location* loc = nullptr;
  uint32_t num_values = 0;             // value ids are 0 .. num_values-1

  const Block& entry() const { return body.entry(); }
  const std::vector<Value>& args() const { return body.entry().args; }
};

class Module {
 public:
  Module();
  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  std::vector<Func> funcs;
  std::vector<Op> other_ops;             // top-level ops that are not funcs (e.g. sdy.mesh)
  std::vector<NamedAttribute> attrs;     // module attributes (mhlo.num_partitions, ...)
  std::string name;                      // sym_name of the module, if any
  const Location* loc = nullptr;
  std::string producer;                  // bytecode producer string, e.g. "StableHLO_v1.20.0"
  int version[3] = {0, 0, 0};            // the artifact's StableHLO version

  const Func* find_func(std::string_view n) const;
  Func* find_func(std::string_view n);

  TypeArena& types() { return *types_; }
  const TypeArena& types() const { return *types_; }
  // Interns a location; the pointer lives as long as the Module.
  const Location* intern_location(Location loc);
  const Location* unknown_location() const { return unknown_loc_; }
  // Keeps `bytes` alive for the Module's lifetime (the input artifact).
  void keep_alive(std::shared_ptr<const void> bytes) { keepalive_.push_back(std::move(bytes)); }
  // Stores a buffer owned by the Module and returns a view of it (for rewritten data).
  std::span<const uint8_t> own_bytes(std::vector<uint8_t> data);

 private:
  std::unique_ptr<TypeArena> types_;
  std::unique_ptr<std::deque<Location>> locations_;
  std::unique_ptr<std::deque<std::vector<uint8_t>>> owned_;
  std::vector<std::shared_ptr<const void>> keepalive_;
  const Location* unknown_loc_ = nullptr;
};

// Calls fn(op) for every op in `region`, nested regions included, in pre-order.
template <typename Fn>
void walk(const Region& region, Fn&& fn) {
  for (const Block& b : region.blocks)
    for (const Op& op : b.ops) {
      fn(op);
      for (const Region& r : op.regions) walk(r, fn);
    }
}

// The func of `m` whose body (nested regions included) holds `op`; null if none does.
const Func* enclosing_func(const Module& m, const Op& op);

}  // namespace jaxmlx::ir
