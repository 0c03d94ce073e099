#include "runtime/elementwise_chains.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "lower/shape_util.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

std::optional<FusedOp> fused_op_of(std::string_view name) {
  static const std::unordered_map<std::string_view, FusedOp> ops = [] {
    std::unordered_map<std::string_view, FusedOp> m;
    for (int i = 0; i <= static_cast<int>(FusedOp::kAsType); ++i)
      m.emplace(fused_op_name(static_cast<FusedOp>(i)), static_cast<FusedOp>(i));
    return m;
  }();
  if (name.substr(0, 5) == "View ") return FusedOp::kView;  // "View float32"
  auto it = ops.find(name);
  if (it == ops.end()) return std::nullopt;
  return it->second;
}

// The operand dtype an elementwise primitive computes in (Select's: its value operands').
mx::Dtype operand_dtype(FusedOp op, const mx::array& a) {
  return a.inputs()[op == FusedOp::kSelect ? 1 : 0].dtype();
}

// `a` as one instruction of a chain, when it is one: a single-output primitive on the target's
// device that the target computes, whose operands all have its shape.
std::optional<FusedOp> instruction_of(const mx::array& a, const FusionTarget& t) {
  if (!a.has_primitive() || !a.siblings().empty() || a.inputs().empty()) return std::nullopt;
  if (a.primitive().stream().device != t.device) return std::nullopt;
  std::optional<FusedOp> op = fused_op_of(a.primitive().name());
  if (!op) return std::nullopt;
  const size_t arity = *op == FusedOp::kSelect || *op == FusedOp::kFma ? 3 : a.inputs().size();
  if (a.inputs().size() != arity || arity > 3) return std::nullopt;
  const mx::Dtype arg = operand_dtype(*op, a);
  for (size_t i = 0; i < a.inputs().size(); ++i) {
    const mx::array& in = a.inputs()[i];
    if (in.shape() != a.shape()) return std::nullopt;
    const bool condition = *op == FusedOp::kSelect && i == 0;
    if (in.dtype() != (condition ? mx::bool_ : arg)) return std::nullopt;
  }
  if (!t.supports(*op, arg, a.dtype())) return std::nullopt;
  return op;
}

// Whether `a` reads `b` broadcast numpy-style: b's dims, aligned to a's trailing ones, are 1 or a's.
bool broadcasts_to(const mx::Shape& b, const mx::Shape& a) {
  const mx::Shape t = lower::shape_util::without_leading_ones(b);
  if (t.size() > a.size()) return false;
  for (size_t i = 0; i < t.size(); ++i) {
    const int d = t[t.size() - 1 - i];
    if (d != 1 && d != a[a.size() - 1 - i]) return false;
  }
  return true;
}

// A view feeding a chain of `shape` that the fused kernel reads through strides instead: a
// Broadcast or Full, or a reshape that only adds or drops leading size-1 dims (jax's bias [n] ->
// [1, 1, n]); its input is read broadcast to `shape` in its place.
bool is_adapter_into(const mx::array& a, const mx::Shape& shape, mx::Device::DeviceType device) {
  if (!a.has_primitive() || !a.siblings().empty() || a.inputs().size() != 1 ||
      a.primitive().stream().device != device || a.dtype() != a.inputs()[0].dtype() ||
      !broadcasts_to(a.shape(), shape))
    return false;
  const std::string_view name = a.primitive().name();
  // Full materializes its input broadcast to its shape (mx::zeros_like, mx::full).
  if (name == "Broadcast" || name == "Full") return true;
  using lower::shape_util::without_leading_ones;
  return (name == "Reshape" || name == "Squeeze" || name == "ExpandDims") &&
         without_leading_ones(a.inputs()[0].shape()) == without_leading_ones(a.shape());
}

// Whether half or more of a chain's inputs are strided windows (`as_strided` views: the shifted
// inputs of a depthwise convolution, src/lower/convolution.cc). The fused kernel gathers each
// such input chunk by chunk, row segment by row segment, where MLX's separate kernels stream
// them: a 7x7 depthwise sum of 98 inputs took 22 ms fused and 12.7 ms unfused
// (bench/conv_groups.py).
bool mostly_windows(const std::vector<mx::array>& inputs) {
  constexpr size_t kMinWindows = 4;
  size_t windows = 0;
  for (const mx::array& in : inputs)
    windows += in.has_primitive() && std::string_view(in.primitive().name()) == "AsStrided";
  return windows >= kMinWindows && 2 * windows >= inputs.size();
}

// FusionTarget::sink_into_broadcasts: an instruction `p` read only through Broadcasts, each
// read only by instructions, is computed again at each broadcast's shape over its operands
// broadcast there; each broadcast's readers read that copy. Repeated up the graph (p's operands
// may now be read only through such broadcasts), as long as the target lets each copy share a
// kernel with its readers and operands.
void sink_into_broadcasts(std::vector<mx::array>& outputs, const FusionTarget& t) {
  struct Read {
    mx::array reader;
    size_t slot;
  };
  std::unordered_map<std::uintptr_t, std::vector<Read>> reads;
  std::unordered_set<std::uintptr_t> output_ids, seen;
  std::vector<mx::array> stack, candidates;  // candidates: arrays read through a Broadcast
  for (const mx::array& o : outputs) {
    output_ids.insert(o.id());
    if (o.has_primitive() && seen.insert(o.id()).second) stack.push_back(o);
  }
  auto is_broadcast = [](const mx::array& a) {
    return a.has_primitive() && std::string_view(a.primitive().name()) == "Broadcast";
  };
  while (!stack.empty()) {
    const mx::array a = stack.back();
    stack.pop_back();
    if (is_broadcast(a)) candidates.push_back(a.inputs()[0]);
    for (size_t s = 0; s < a.inputs().size(); ++s) {
      const mx::array& in = a.inputs()[s];
      reads[in.id()].push_back({a, s});
      if (in.has_primitive() && seen.insert(in.id()).second) stack.push_back(in);
    }
  }
  while (!candidates.empty()) {
    const mx::array p = candidates.back();
    candidates.pop_back();
    if (!p.has_primitive() || output_ids.count(p.id()) || !instruction_of(p, t)) continue;
    const std::vector<Read> through = reads[p.id()];  // none once p is sunk
    bool fits = !through.empty();
    for (const Read& via : through) {
      const mx::array& b = via.reader;
      fits = fits && is_broadcast(b) && b.siblings().empty() && !output_ids.count(b.id()) &&
             b.primitive().stream().device == t.device && b.dtype() == p.dtype() &&
             b.shape() != p.shape() && !reads[b.id()].empty();
      if (!fits) break;
      for (const Read& r : reads[b.id()])
        fits = fits && instruction_of(r.reader, t) && !(t.separate && t.separate(r.reader, p));
    }
    // An operand that is no instruction (a row sum, a product) is a kernel input whatever it is.
    for (const mx::array& in : p.inputs())
      fits = fits && !(t.separate && instruction_of(in, t) && t.separate(p, in));
    if (!fits) continue;
    reads.erase(p.id());  // its copies replace it: nothing reads it any more
    for (size_t k = 0; k < p.inputs().size(); ++k) {
      std::vector<Read>& of_input = reads[p.inputs()[k].id()];
      of_input.erase(std::remove_if(of_input.begin(), of_input.end(),
                                    [&](const Read& r) { return r.reader.id() == p.id(); }),
                     of_input.end());
    }
    for (const Read& via : through) {
      const mx::array b = via.reader;
      const mx::Stream stream = b.primitive().stream();
      std::vector<mx::array> operands;
      for (const mx::array& in : p.inputs())
        operands.push_back(mx::broadcast_to(in, b.shape(), stream));
      const mx::array copy(b.shape(), p.dtype(), p.primitive_ptr(), operands);
      std::vector<Read> readers = std::move(reads[b.id()]);
      reads.erase(b.id());
      for (Read& r : readers) r.reader.inputs()[r.slot] = copy;
      reads[copy.id()] = std::move(readers);
      for (size_t k = 0; k < operands.size(); ++k) {
        reads[p.inputs()[k].id()].push_back({operands[k], 0});
        reads[operands[k].id()] = {{copy, k}};
      }
    }
    for (const mx::array& in : p.inputs()) candidates.push_back(in);
  }
}

class Fuser {
 public:
  Fuser(std::vector<mx::array>& outputs, const FusionTarget& target)
      : outputs_(outputs), target_(target) {
    for (const mx::array& o : outputs_) output_ids_.insert(o.id());
    build_tape();
  }

  int run() {
    fold_constant_views();
    int fused = 0;
    for (int i = static_cast<int>(tape_.size()) - 1; i >= 0; --i)
      if (!done_[i] && instruction_of(tape_[i], target_)) fused += fuse_from(i);
    return fused;
  }

 private:
  struct Use {
    int consumer;  // tape index
    int slot;      // which of its inputs
  };

  // Unevaluated nodes reachable from the outputs, producers before consumers.
  // One output at a time: an output read by another output's graph is placed before its reader
  // (all outputs on the stack at once put a reader first when it was popped first).
  void build_tape() {
    std::unordered_set<std::uintptr_t> seen;
    std::vector<std::pair<mx::array, size_t>> stack;
    for (const mx::array& o : outputs_) {
      if (!o.has_primitive() || !seen.insert(o.id()).second) continue;
      stack.emplace_back(o, 0);
      while (!stack.empty()) {
        auto& [a, next] = stack.back();
        if (next < a.inputs().size()) {
          const mx::array in = a.inputs()[next++];
          if (in.has_primitive() && seen.insert(in.id()).second) stack.emplace_back(in, 0);
          continue;
        }
        index_[a.id()] = static_cast<int>(tape_.size());
        tape_.push_back(a);
        stack.pop_back();
      }
    }
    done_.assign(tape_.size(), false);
    for (int c = 0; c < static_cast<int>(tape_.size()); ++c) {
      const std::vector<mx::array>& ins = tape_[c].inputs();
      for (int s = 0; s < static_cast<int>(ins.size()); ++s) uses_[ins[s].id()].push_back({c, s});
    }
  }

  // A bit view of a small constant (our lowering writes exact f32 constants as int bits viewed
  // as f32, lower/xla_cpu_log.cc) would run as a primitive on every replay: its readers read the
  // viewed value as a constant instead.
  void fold_constant_views() {
    constexpr size_t kMaxElements = 64;
    for (int i = 0; i < static_cast<int>(tape_.size()); ++i) {
      const mx::array a = tape_[i];
      if (a.inputs().size() != 1 || std::string_view(a.primitive().name()).substr(0, 5) != "View ")
        continue;
      const mx::array& in = a.inputs()[0];
      if (in.has_primitive() || !in.is_available() || in.size() > kMaxElements ||
          in.itemsize() != 4 || a.itemsize() != 4 || !in.flags().row_contiguous ||
          in.shape() != a.shape())
        continue;
      std::vector<uint32_t> bits(in.data<uint32_t>(), in.data<uint32_t>() + in.size());
      std::optional<mx::array> folded;
      if (a.dtype() == mx::float32)
        folded = mx::array(reinterpret_cast<const float*>(bits.data()), a.shape(), mx::float32);
      else if (a.dtype() == mx::int32)
        folded = mx::array(reinterpret_cast<const int32_t*>(bits.data()), a.shape(), mx::int32);
      else if (a.dtype() == mx::uint32)
        folded = mx::array(bits.data(), a.shape(), mx::uint32);
      if (!folded) continue;
      for (const Use& u : uses_[a.id()]) rewire(u, *folded);
      uses_[a.id()].clear();
      replace_output(a, *folded);
      done_[i] = true;
    }
  }

  int tape_index(const mx::array& a) const {
    auto it = index_.find(a.id());
    return it == index_.end() ? -1 : it->second;
  }

  // The reader `u` (and its siblings, which share its inputs) reads `now` in that slot.
  void rewire(const Use& u, const mx::array& now) {
    mx::array& consumer = tape_[u.consumer];
    consumer.inputs()[u.slot] = now;
    for (mx::array& sibling : consumer.siblings())
      if (sibling.inputs().size() > static_cast<size_t>(u.slot)) sibling.inputs()[u.slot] = now;
  }

  // A result of the whole graph that was `was` is `now`.
  void replace_output(const mx::array& was, const mx::array& now) {
    for (mx::array& o : outputs_)
      if (o.id() == was.id()) o = now;
    if (output_ids_.erase(was.id()) && now.has_primitive()) output_ids_.insert(now.id());
  }

  // Whether tape node `j` joining `in_chain` would put a pair the target keeps apart in one chain.
  bool kept_apart(int j, const std::unordered_set<int>& in_chain) const {
    if (!target_.separate) return false;
    const mx::array& a = tape_[j];
    if (auto it = uses_.find(a.id()); it != uses_.end())
      for (const Use& u : it->second)
        if (in_chain.count(u.consumer) && target_.separate(tape_[u.consumer], a)) return true;
    for (const mx::array& in : a.inputs()) {
      const int k = tape_index(in);
      if (k >= 0 && in_chain.count(k) && target_.separate(a, in)) return true;
    }
    return false;
  }

  // The chain grown from its last op (tape index `root`) toward its operands, at most `cap`
  // members. An operand joins when it is an instruction (or a view read through strides) of the
  // chain's shape that nothing else reads; with `multi`, an instruction joins whatever else
  // reads it (it becomes one more result of the fused primitive).
  std::vector<int> grow(int root, bool multi, size_t cap) {
    const mx::Shape& shape = tape_[root].shape();
    std::vector<int> members{root};
    std::vector<size_t> depth{0};  // members' levels below the root
    std::unordered_set<int> in_chain{root};
    for (bool grew = true; grew && members.size() < cap;) {
      grew = false;
      for (size_t m = 0; m < members.size() && members.size() < cap; ++m) {
        if (target_.max_depth > 0 && depth[m] + 1 >= target_.max_depth) continue;
        const bool adapter = !instruction_of(tape_[members[m]], target_);
        for (const mx::array& in : tape_[members[m]].inputs()) {
          const int j = tape_index(in);
          if (j < 0 || done_[j] || in_chain.count(j)) continue;
          // An instruction's operands have the chain's shape; an adapter's input is another
          // adapter or stays outside.
          const bool instruction = !adapter && in.shape() == shape && instruction_of(in, target_);
          const bool ok = instruction || (adapter ? is_adapter_into(in, shape, target_.device)
                                                  : in.shape() == shape &&
                                                        is_adapter_into(in, shape, target_.device));
          if (!ok || kept_apart(j, in_chain)) continue;
          if (!(multi && instruction)) {
            const std::vector<Use>& u = uses_[in.id()];
            if (output_ids_.count(in.id()) ||
                !std::all_of(u.begin(), u.end(),
                             [&](const Use& x) { return in_chain.count(x.consumer) > 0; }))
              continue;
          }
          members.push_back(j);
          depth.push_back(depth[m] + 1);
          in_chain.insert(j);
          grew = true;
        }
      }
    }
    return members;
  }

  // Whether fusing `in_chain` would close a cycle: a member read outside the chain by something
  // that, through other nodes, feeds the chain again. Walks forward from the outside readers
  // (a walk too long to finish counts as a cycle).
  bool closes_cycle(const std::unordered_set<int>& in_chain) {
    constexpr size_t kMaxWalk = 1 << 15;
    std::vector<int> stack;
    for (int m : in_chain)
      for (const Use& u : uses_[tape_[m].id()])
        if (!in_chain.count(u.consumer)) stack.push_back(u.consumer);
    std::unordered_set<int> seen;
    while (!stack.empty()) {
      const int c = stack.back();
      stack.pop_back();
      if (!seen.insert(c).second) continue;
      if (in_chain.count(c) || seen.size() > kMaxWalk) return true;
      for (const Use& u : uses_[tape_[c].id()]) stack.push_back(u.consumer);
    }
    return false;
  }

  // Whether chain member `m` (an instruction) is one of the fused primitive's results: the last
  // op, a result of the whole graph, or read by something outside the chain.
  bool is_result(int m, int root, const std::unordered_set<int>& in_chain) const {
    const mx::array& a = tape_[m];
    if (m == root || output_ids_.count(a.id())) return true;
    auto it = uses_.find(a.id());
    return it != uses_.end() && std::any_of(it->second.begin(), it->second.end(), [&](const Use& x) {
             return !in_chain.count(x.consumer);
           });
  }

  // How many arrays a chain reads and writes: its inputs from outside and its results.
  size_t arrays_of(int root, const std::vector<int>& members,
                   const std::unordered_set<int>& in_chain) const {
    std::unordered_set<std::uintptr_t> inputs;
    size_t results = 0;
    for (int m : members) {
      for (const mx::array& in : tape_[m].inputs()) {
        const int j = tape_index(in);
        if (j < 0 || !in_chain.count(j)) inputs.insert(in.id());
      }
      results += instruction_of(tape_[m], target_) && is_result(m, root, in_chain);
    }
    return inputs.size() + results;
  }

  // Fuses the chain ending at tape index `root` when it replaces two primitives or more.
  // Returns 1 when it did.
  int fuse_from(int root) {
    const mx::array last = tape_[root];
    const mx::Shape& shape = last.shape();
    if (last.size() == 0) return 0;
    std::vector<int> members;
    std::unordered_set<int> in_chain;
    for (size_t cap = target_.max_chain;; cap = std::max<size_t>(1, members.size() / 2)) {
      members = grow(root, target_.multi_output, cap);
      in_chain = std::unordered_set<int>(members.begin(), members.end());
      if (target_.multi_output && closes_cycle(in_chain)) {
        members = grow(root, false, cap);
        in_chain = std::unordered_set<int>(members.begin(), members.end());
      }
      if (target_.max_arrays == 0 || members.size() < 2 ||
          arrays_of(root, members, in_chain) <= target_.max_arrays)
        break;
    }
    if (members.size() < 2) return 0;
    std::sort(members.begin(), members.end());  // tape order: operands first

    // Inputs: operands from outside the chain, and what its adapters read.
    auto program = std::make_shared<FusedProgram>();
    std::vector<mx::array> inputs;
    std::unordered_map<std::uintptr_t, int> reg;  // array id -> register
    auto input_reg = [&](const mx::array& a) {
      auto [it, added] = reg.emplace(a.id(), static_cast<int>(inputs.size()));
      if (added) inputs.push_back(a);
      return it->second;
    };
    auto member = [&](const mx::array& a) {
      const int j = tape_index(a);
      return j >= 0 && in_chain.count(j) > 0;
    };
    for (int m : members)
      for (const mx::array& in : tape_[m].inputs())
        if (!member(in)) input_reg(in);
    if (target_.skip_windows && mostly_windows(inputs)) {  // left unfused, sub-chains included
      for (int m : members) done_[m] = true;
      return 0;
    }
    program->num_inputs = static_cast<int>(inputs.size());
    // Results: the last op, and every member something outside the chain reads (or a result of
    // the whole graph), in tape order.
    std::vector<int> results;
    std::vector<mx::Dtype> dtypes;
    std::vector<mx::array> instructions;
    for (int m : members) {
      const mx::array& a = tape_[m];
      std::optional<FusedOp> op = instruction_of(a, target_);
      if (!op) {  // an adapter reads what its input's register holds, broadcast
        reg[a.id()] = reg.at(a.inputs()[0].id());
        continue;
      }
      FusedInstr ins{*op, a.dtype(), operand_dtype(*op, a), {}};
      instructions.push_back(a);
      for (const mx::array& in : a.inputs()) ins.args.push_back(reg.at(in.id()));
      reg[a.id()] = program->num_inputs + static_cast<int>(program->code.size());
      program->code.push_back(std::move(ins));
      if (is_result(m, root, in_chain)) {
        results.push_back(m);
        program->outputs.push_back(reg[a.id()]);
        dtypes.push_back(a.dtype());
      }
    }

    if (instructions.size() < target_.min_instructions) return 0;
    std::optional<std::vector<mx::array>> made =
        target_.make(last.primitive().stream(), program, inputs, shape, dtypes, instructions);
    if (!made || made->size() != results.size()) {  // left unfused, sub-chains included
      for (int m : members) done_[m] = true;
      return 0;
    }
    // Whoever outside the chain read one of its results reads the fused array now.
    std::vector<std::vector<Use>> readers(results.size());
    for (size_t r = 0; r < results.size(); ++r) {
      const mx::array was = tape_[results[r]];
      const mx::array& fused = (*made)[r];
      for (const Use& x : uses_[was.id()]) {
        if (in_chain.count(x.consumer)) continue;
        readers[r].push_back(x);
        rewire(x, fused);
      }
      uses_[was.id()].clear();
      replace_output(was, fused);
    }
    // The chain's inputs are read by the arrays the target made now (the fused array, or views
    // and a kernel between it and them: each input at whatever slot it has there), not by the
    // members. Those arrays join the tape so that fusing a chain that produces one of the inputs
    // later rewires the right slot.
    std::unordered_set<std::uintptr_t> input_ids;
    for (const mx::array& in : inputs) {
      input_ids.insert(in.id());
      std::vector<Use>& u = uses_[in.id()];
      u.erase(std::remove_if(u.begin(), u.end(),
                             [&](const Use& x) { return in_chain.count(x.consumer) > 0; }),
              u.end());
    }
    std::vector<mx::array> made_nodes;
    std::unordered_set<std::uintptr_t> seen;
    for (std::vector<mx::array> stack(made->begin(), made->end()); !stack.empty();) {
      mx::array a = std::move(stack.back());
      stack.pop_back();
      if (input_ids.count(a.id()) || !a.has_primitive() || !seen.insert(a.id()).second) continue;
      made_nodes.push_back(a);
      for (const mx::array& in : a.inputs()) stack.push_back(in);
    }
    for (const mx::array& a : made_nodes) {
      index_[a.id()] = static_cast<int>(tape_.size());
      tape_.push_back(a);
      done_.push_back(true);
    }
    // Their reads of each other are uses too (the fused array reading a reshape the target put
    // before an input): closes_cycle walks through them.
    for (const mx::array& a : made_nodes)
      for (int s = 0; s < static_cast<int>(a.inputs().size()); ++s)
        if (const std::uintptr_t id = a.inputs()[s].id(); input_ids.count(id) || seen.count(id))
          uses_[id].push_back({index_.at(a.id()), s});
    for (size_t r = 0; r < results.size(); ++r) {
      std::vector<Use>& u = uses_[(*made)[r].id()];
      u.insert(u.end(), readers[r].begin(), readers[r].end());
    }
    for (int m : members) done_[m] = true;
    return 1;
  }

  std::vector<mx::array>& outputs_;
  const FusionTarget& target_;
  std::unordered_set<std::uintptr_t> output_ids_;
  std::vector<mx::array> tape_;
  std::vector<bool> done_;
  std::unordered_map<std::uintptr_t, int> index_;
  std::unordered_map<std::uintptr_t, std::vector<Use>> uses_;
};

}  // namespace

int fuse_elementwise_chains(std::vector<mx::array>& outputs, const FusionTarget& target) {
  if (target.sink_into_broadcasts) sink_into_broadcasts(outputs, target);
  const int fused = Fuser(outputs, target).run();
  if (fused > 0 && !graph_is_acyclic(outputs))
    throw std::logic_error("[jaxmlx fusion] the fused graph reads its own result (a bug: please "
                           "report it); this program runs without a traced graph");
  return fused;
}

bool graph_is_acyclic(const std::vector<mx::array>& outputs) {
  std::unordered_map<std::uintptr_t, bool> open;  // id -> still on the walk's path
  std::vector<std::pair<mx::array, size_t>> stack;
  for (const mx::array& o : outputs) {
    if (open.count(o.id())) continue;
    open[o.id()] = true;
    stack.emplace_back(o, 0);
    while (!stack.empty()) {
      auto& [a, next] = stack.back();
      if (next == a.inputs().size()) {
        open[a.id()] = false;
        stack.pop_back();
        continue;
      }
      const mx::array in = a.inputs()[next++];
      if (auto it = open.find(in.id()); it != open.end()) {
        if (it->second) return false;
        continue;
      }
      open[in.id()] = true;
      stack.emplace_back(in, 0);
    }
  }
  return true;
}

}  // namespace jaxmlx::runtime
