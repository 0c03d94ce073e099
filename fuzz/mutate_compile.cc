// jaxmlx-mutate-compile (build/tools) [--iterations N] [--seed S] [--only-iteration I] [--no-run]
//                       [--each-func [--only-func NAME]] [--quiet] FILE_OR_DIR...
//
// Malformed programs past the reader: each StableHLO portable artifact given is read, and then
// for each iteration read again, changed in one to three random places (an attribute's value, a
// result's type, an operand or their number, the order of two ops) and compiled the way
// PJRT_Client_Compile compiles it (verifier, passes, lowering check, trial run); a program that
// compiles is then run once on zero-filled inputs (unless it has a loop, which may now run for as
// long as a changed bound says). Every outcome must be a Status: a crash, an abort or a hang is a
// bug (the reader's own fuzzers, fuzz/, stop at reading). The changes are deterministic in (seed,
// file name, iteration), and the line printed before each case names them, so that the last line
// before a crash is its reproducer:
//   jaxmlx-mutate-compile --seed S --only-iteration I FILE
// --each-func compiles each public func of a file as the program in turn, first as it is
// (iteration -1) and then changed: StableHLO's own test files (../shared/testdata/vhlo) hold
// every op's forms, one per func.
// Exit status: 0 when every case ended in a Status, 2 on a usage error.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/module.h"
#include "ir/printer.h"
#include "pjrt/element_types.h"
#include "runtime/executable.h"
#include "vhlo/read.h"

namespace {

using namespace jaxmlx;

constexpr char kUsage[] =
    "usage: jaxmlx-mutate-compile [--iterations N] [--seed S] [--only-iteration I] [--no-run]\n"
    "                             [--each-func [--only-func NAME]] [--quiet] FILE_OR_DIR...\n";

// Inputs larger than this are not made (a mutated dim may ask for terabytes): the case stops
// after compiling.
constexpr size_t kMaxInputBytes = size_t{64} << 20;

// @main and the funcs it calls, directly or not: what a compile reads.
std::vector<std::string> reachable_funcs(const ir::Module& m) {
  std::vector<std::string> todo{"main"}, seen;
  while (!todo.empty()) {
    std::string name = todo.back();
    todo.pop_back();
    const ir::Func* f = m.find_func(name);
    if (f == nullptr || std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    seen.push_back(name);
    ir::walk(f->body, [&](const ir::Op& o) {
      for (const ir::NamedAttribute& a : o.attrs)
        if (const auto* callee = a.value.as<ir::SymbolRefAttr>()) todo.push_back(callee->name);
    });
  }
  return seen;
}

// Whether @main, or a func it calls, has a while loop.
bool has_loop(const ir::Module& m) {
  bool loops = false;
  for (const std::string& name : reachable_funcs(m))
    ir::walk(m.find_func(name)->body,
             [&](const ir::Op& o) { loops |= o.kind == ir::OpKind::kWhile; });
  return loops;
}

class Mutator {
 public:
  Mutator(ir::Module& m, uint64_t seed) : m_(m), rng_(seed) {}

  // Applies one random change; returns what it did (empty when it found nothing to change).
  std::string mutate_once() {
    std::vector<ir::Op*> ops;
    std::vector<ir::Func*> owners;
    const std::vector<std::string> reachable = reachable_funcs(m_);
    for (ir::Func& f : m_.funcs)
      if (std::find(reachable.begin(), reachable.end(), f.name) != reachable.end())
        collect(f.body, &f, ops, owners);
    if (ops.empty()) return "";
    size_t k = pick(ops.size());
    ir::Op& op = *ops[k];
    ir::Func& func = *owners[k];
    switch (pick(7)) {
      case 0:
      case 1: return mutate_attr(op);
      case 2: return mutate_result_type(op, func, /*everywhere=*/false);
      case 3: return mutate_result_type(op, func, /*everywhere=*/true);
      case 4: return replace_operand(op, func);
      case 5: return change_operand_count(op);
      default: return swap_ops(func);
    }
  }

 private:
  size_t pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

  static void collect(ir::Region& r, ir::Func* f, std::vector<ir::Op*>& ops,
                      std::vector<ir::Func*>& owners) {
    for (ir::Block& b : r.blocks)
      for (ir::Op& o : b.ops) {
        ops.push_back(&o);
        owners.push_back(f);
        for (ir::Region& inner : o.regions) collect(inner, f, ops, owners);
      }
  }

  int64_t odd_int(int64_t v) {
    const int64_t up = v == INT64_MAX ? v : v + 1, down = v == INT64_MIN ? v : v - 1;
    const int64_t choices[] = {up, down, -1, 0, 1, 2, 3, 7, 64, int64_t{1} << 20,
                               int64_t{1} << 31, -(int64_t{1} << 31), INT64_MAX, INT64_MIN,
                               static_cast<int64_t>(pick(9))};
    return choices[pick(std::size(choices))];
  }

  std::string mutate_ints(std::vector<int64_t>& v) {
    switch (v.empty() ? 2 : pick(4)) {
      case 0:
      case 1: {
        size_t i = pick(v.size());
        v[i] = odd_int(v[i]);
        return "element " + std::to_string(i) + " = " + std::to_string(v[i]);
      }
      case 2: v.push_back(odd_int(0)); return "appended " + std::to_string(v.back());
      default: v.pop_back(); return "dropped the last element";
    }
  }

  // One of a gather's or scatter's dimension lists, or its index_vector_dim.
  std::string mutate_fields(std::initializer_list<std::vector<int64_t>*> fields,
                            int64_t& index_vector_dim) {
    size_t i = pick(fields.size() + 1);
    if (i == fields.size()) {
      index_vector_dim = odd_int(index_vector_dim);
      return "index_vector_dim = " + std::to_string(index_vector_dim);
    }
    return "field " + std::to_string(i) + " " + mutate_ints(*fields.begin()[i]);
  }

  std::string mutate_value(ir::Attribute& a) {
    if (auto* x = std::get_if<ir::IntAttr>(&a.value)) {
      x->value = odd_int(x->value);
      return "int = " + std::to_string(x->value);
    }
    if (auto* x = std::get_if<bool>(&a.value)) {
      *x = !*x;
      return "bool flipped";
    }
    if (auto* x = std::get_if<ir::EnumAttr>(&a.value)) {
      x->value = static_cast<int32_t>(pick(ir::enum_value_count(x->kind) + 2)) - 1;
      return "enum = " + std::to_string(x->value);
    }
    if (auto* x = std::get_if<ir::I64ArrayAttr>(&a.value)) return mutate_ints(x->values);
    if (auto* x = std::get_if<ir::BoolArrayAttr>(&a.value)) {
      if (x->values.empty() || pick(2)) {
        x->values.push_back(pick(2));
        return "bool appended";
      }
      x->values.pop_back();
      return "bool dropped";
    }
    if (auto* x = std::get_if<ir::GatherDims>(&a.value)) {
      return "gather " + mutate_fields({&x->offset_dims, &x->collapsed_slice_dims,
                                        &x->operand_batching_dims,
                                        &x->start_indices_batching_dims, &x->start_index_map},
                                       x->index_vector_dim);
    }
    if (auto* x = std::get_if<ir::ScatterDims>(&a.value)) {
      return "scatter " + mutate_fields({&x->update_window_dims, &x->inserted_window_dims,
                                         &x->input_batching_dims,
                                         &x->scatter_indices_batching_dims,
                                         &x->scatter_dims_to_operand_dims},
                                        x->index_vector_dim);
    }
    if (auto* x = std::get_if<ir::DotDims>(&a.value)) {
      std::vector<int64_t>* f[] = {&x->lhs_batching_dimensions, &x->rhs_batching_dimensions,
                                   &x->lhs_contracting_dimensions,
                                   &x->rhs_contracting_dimensions};
      size_t i = pick(std::size(f));
      return "dot field " + std::to_string(i) + " " + mutate_ints(*f[i]);
    }
    if (auto* x = std::get_if<ir::ConvDims>(&a.value)) {
      int64_t* ints[] = {&x->input_batch_dimension,          &x->input_feature_dimension,
                         &x->kernel_input_feature_dimension, &x->kernel_output_feature_dimension,
                         &x->output_batch_dimension,         &x->output_feature_dimension};
      std::vector<int64_t>* vecs[] = {&x->input_spatial_dimensions, &x->kernel_spatial_dimensions,
                                      &x->output_spatial_dimensions};
      size_t i = pick(std::size(ints) + std::size(vecs));
      if (i < std::size(ints)) {
        *ints[i] = odd_int(*ints[i]);
        return "conv int " + std::to_string(i) + " = " + std::to_string(*ints[i]);
      }
      return "conv field " + std::to_string(i) + " " + mutate_ints(*vecs[i - std::size(ints)]);
    }
    if (auto* x = std::get_if<ir::DenseElementsAttr>(&a.value)) {
      if (x->type != nullptr && pick(2)) {
        // Another shape or element type over the same bytes (more elements than the data holds).
        const ir::Type* t = odd_type(*x->type);
        if (t == nullptr) return "";
        x->type = t;
        return "dense typed " + ir::type_to_string(*t);
      }
      if (x->type == nullptr || !ir::is_integer(x->type->dtype) || x->data.empty()) return "";
      const int bytes = ir::element_storage_bytes(x->type->dtype);
      if (bytes <= 0 || x->data.size() % bytes != 0) return "";
      std::vector<uint8_t> data(x->data.begin(), x->data.end());
      size_t i = pick(data.size() / bytes);
      int64_t v = odd_int(x->int_at(static_cast<int64_t>(i)));
      for (int b = 0; b < bytes; ++b) data[i * bytes + b] = static_cast<uint8_t>(v >> (8 * b));
      x->data = m_.own_bytes(std::move(data));
      return "dense element " + std::to_string(i) + " = " + std::to_string(v);
    }
    if (auto* x = std::get_if<ir::ArrayAttr>(&a.value)) {
      if (x->items.empty()) return "";
      size_t i = pick(x->items.size());
      std::string what = mutate_value(x->items[i]);
      return what.empty() ? "" : "item " + std::to_string(i) + " " + what;
    }
    return "";
  }

  std::string mutate_attr(ir::Op& op) {
    if (op.attrs.empty()) return "";
    ir::NamedAttribute& a = op.attrs[pick(op.attrs.size())];
    std::string what = mutate_value(a.value);
    if (what.empty()) return "";
    return std::string(op.name()) + " attribute " + a.name + ": " + what;
  }

  const ir::Type* odd_type(const ir::Type& t) {
    ir::Type u = t;
    if (!u.is_tensor || !u.ranked || u.dtype == ir::ElementType::kTuple ||
        u.dtype == ir::ElementType::kToken)
      return nullptr;
    const ir::ElementType dtypes[] = {ir::ElementType::kPred, ir::ElementType::kS32,
                                      ir::ElementType::kS64,  ir::ElementType::kU8,
                                      ir::ElementType::kF16,  ir::ElementType::kF32,
                                      ir::ElementType::kF64,  ir::ElementType::kC64};
    switch (u.dims.empty() ? 3 : pick(5)) {
      case 0:
      case 1: {
        size_t i = pick(u.dims.size());
        const int64_t d = u.dims[i] == ir::kDynamic ? 1 : u.dims[i];  // kDynamic: INT64_MIN
        const int64_t choices[] = {d + 1, d - 1, 0, 1, int64_t{1} << 20,
                                   int64_t{1} << 40, ir::kDynamic};
        u.dims[i] = choices[pick(std::size(choices))];
        break;
      }
      case 2: u.dims.pop_back(); break;
      case 3: u.dims.push_back(static_cast<int64_t>(pick(4))); break;
      default: u.dtype = dtypes[pick(std::size(dtypes))]; break;
    }
    u.bounds.clear();
    return m_.types().intern(std::move(u));
  }

  static void retype(ir::Region& r, uint32_t id, const ir::Type* t) {
    for (ir::Block& b : r.blocks) {
      for (ir::Value& v : b.args)
        if (v.id == id) v.type = t;
      for (ir::Op& o : b.ops) {
        for (ir::Value& v : o.operands)
          if (v.id == id) v.type = t;
        for (ir::Value& v : o.results)
          if (v.id == id) v.type = t;
        for (ir::Region& inner : o.regions) retype(inner, id, t);
      }
    }
  }

  std::string mutate_result_type(ir::Op& op, ir::Func& func, bool everywhere) {
    if (op.results.empty()) return "";
    ir::Value& r = op.results[pick(op.results.size())];
    const ir::Type* t = odd_type(*r.type);
    if (t == nullptr) return "";
    std::string what = std::string(op.name()) + " result %" + std::to_string(r.id) + " typed " +
                       ir::type_to_string(*t) + (everywhere ? " everywhere" : " at its definition");
    if (everywhere) {
      uint32_t id = r.id;
      retype(func.body, id, t);
      for (size_t i = 0; i < func.result_types.size(); ++i) {
        const ir::Op& ret = func.body.blocks.front().ops.back();
        if (i < ret.operands.size() && ret.operands[i].id == id) func.result_types[i] = t;
      }
      for (size_t i = 0; i < func.args().size(); ++i)
        if (func.args()[i].id == id) func.arg_types[i] = t;
    } else {
      r.type = t;
    }
    return what;
  }

  std::string replace_operand(ir::Op& op, ir::Func& func) {
    if (op.operands.empty()) return "";
    // Any value of the func: one defined later, in another region, or of another type.
    std::vector<ir::Value> values;
    std::function<void(ir::Region&)> gather = [&](ir::Region& r) {
      for (ir::Block& b : r.blocks) {
        for (ir::Value& v : b.args) values.push_back(v);
        for (ir::Op& o : b.ops) {
          for (ir::Value& v : o.results) values.push_back(v);
          for (ir::Region& inner : o.regions) gather(inner);
        }
      }
    };
    gather(func.body);
    if (values.empty()) return "";
    size_t i = pick(op.operands.size());
    op.operands[i] = values[pick(values.size())];
    return std::string(op.name()) + " operand " + std::to_string(i) + " = %" +
           std::to_string(op.operands[i].id);
  }

  // One operand fewer, or one more (a copy of another): what an op of a variable number of
  // operands (a call, a return, a concatenate, a reduce, a custom call) must check itself.
  std::string change_operand_count(ir::Op& op) {
    if (op.operands.empty()) return "";
    if (pick(2)) {
      op.operands.pop_back();
      return std::string(op.name()) + " lost its last operand";
    }
    op.operands.push_back(op.operands[pick(op.operands.size())]);
    return std::string(op.name()) + " got one more operand";
  }

  std::string swap_ops(ir::Func& func) {
    std::vector<ir::Block*> blocks;
    std::function<void(ir::Region&)> gather = [&](ir::Region& r) {
      for (ir::Block& b : r.blocks) {
        if (b.ops.size() >= 3) blocks.push_back(&b);
        for (ir::Op& o : b.ops)
          for (ir::Region& inner : o.regions) gather(inner);
      }
    };
    gather(func.body);
    if (blocks.empty()) return "";
    ir::Block& b = *blocks[pick(blocks.size())];
    size_t i = pick(b.ops.size() - 2);  // never the terminator
    std::swap(b.ops[i], b.ops[i + 1]);
    return "swapped ops " + std::to_string(i) + " and " + std::to_string(i + 1) + " of a block";
  }

  ir::Module& m_;
  std::mt19937_64 rng_;
};

std::shared_ptr<const std::vector<uint8_t>> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return nullptr;
  return std::make_shared<const std::vector<uint8_t>>(std::istreambuf_iterator<char>(in),
                                                      std::istreambuf_iterator<char>());
}

// Runs an executable once on zero-filled inputs and waits for it. Returns its status.
Status run_once(runtime::Executable& exe, std::shared_ptr<runtime::DeviceWorker> worker) {
  std::vector<std::shared_ptr<runtime::Buffer>> inputs, outputs;
  for (const runtime::TensorSpec& spec : exe.inputs()) {
    PJRT_Buffer_Type type = pjrt::pjrt_type_for(spec.dtype);
    std::optional<runtime::Storage> storage = pjrt::storage_for(type);
    if (!storage) return unimplemented("an input of a type no buffer holds");
    size_t n = 1;
    for (int64_t d : spec.dims) {
      if (d < 0 || __builtin_mul_overflow(n, static_cast<size_t>(d), &n))
        return unimplemented("an input too large to make");
    }
    if (__builtin_mul_overflow(n, static_cast<size_t>(storage->element_bytes), &n) ||
        n > kMaxInputBytes)
      return unimplemented("an input too large to make");
    std::vector<uint8_t> zeros(n);
    ASSIGN_OR_RETURN(auto b, runtime::Buffer::from_host(*worker, type, spec.dims, *storage,
                                                        runtime::HostView{zeros.data(), {}},
                                                        /*copy_now=*/true, runtime::Event()));
    inputs.push_back(std::move(b));
  }
  for (const runtime::TensorSpec& spec : exe.outputs()) {
    PJRT_Buffer_Type type = pjrt::pjrt_type_for(spec.dtype);
    std::optional<runtime::Storage> storage = pjrt::storage_for(type);
    if (!storage) storage = runtime::Storage{mlx::core::bool_, 1, 0};  // a token
    outputs.push_back(runtime::Buffer::pending(*worker, type, spec.dims, *storage));
  }
  runtime::Event done;
  exe.execute(inputs, outputs, done);
  Status st = done.await();
  for (auto& o : outputs) o->mark_deleted();
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 100;
  uint64_t seed = 1;
  long only = LONG_MIN;  // every iteration
  std::string only_func;
  bool run = true, quiet = false, each_func = false;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--iterations" && i + 1 < argc) iterations = std::stoi(next());
    else if (a == "--seed" && i + 1 < argc) seed = std::stoull(next());
    else if (a == "--only-iteration" && i + 1 < argc) only = std::stol(next());
    else if (a == "--no-run") run = false;
    else if (a == "--each-func") each_func = true;
    else if (a == "--only-func" && i + 1 < argc) only_func = next();
    else if (a == "--quiet") quiet = true;
    else if (!a.empty() && a[0] != '-') {
      std::filesystem::path p(a);
      if (std::filesystem::is_directory(p)) {
        for (const auto& e : std::filesystem::recursive_directory_iterator(p))
          if (e.is_regular_file()) files.push_back(e.path());
      } else {
        files.push_back(p);
      }
    } else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (files.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::sort(files.begin(), files.end());
  auto worker = std::make_shared<runtime::DeviceWorker>();
  size_t compiled = 0, ran = 0, refused = 0, cases = 0;
  for (const auto& path : files) {
    auto bytes = read_file(path);
    auto seed_module = bytes ? vhlo::read_portable_artifact(bytes) : StatusOr<ir::Module>(
                                                                          not_found("unreadable"));
    if (!seed_module.ok()) continue;  // a seed must read
    // The funcs compiled as the program: @main, or with --each-func every public func in turn
    // (StableHLO's own test files hold one op's forms per func).
    std::vector<std::string> entries;
    for (const ir::Func& f : seed_module->funcs)
      if (each_func ? f.visibility == ir::Visibility::kPublic && !f.body.empty()
                    : f.name == "main")
        entries.push_back(f.name);
    const uint64_t file_seed = std::hash<std::string>{}(path.filename().string());
    for (size_t e = 0; e < entries.size(); ++e) {
      if (!only_func.empty() && entries[e] != only_func) continue;  // same seeds as in a full run
      // With --each-func the func is compiled once as it is too (iteration -1).
      for (long it = each_func ? -1 : 0; it < iterations; ++it) {
        if (only != LONG_MIN && it != only) continue;
        auto module = vhlo::read_portable_artifact(bytes);
        if (each_func) {
          for (ir::Func& f : module->funcs)
            if (f.name == "main") f.name = "main_";
          module->find_func(entries[e])->name = "main";
        }
        const uint64_t case_seed = seed * 0x9E3779B97F4A7C15ull ^ file_seed ^
                                   static_cast<uint64_t>(it) ^ (static_cast<uint64_t>(e) << 32);
        Mutator mutator(*module, case_seed);
        std::string what = it < 0 ? "unchanged" : "";
        const int changes = it < 0 ? 0 : 1 + static_cast<int>((it * 7 + seed) % 3);
        for (int c = 0; c < changes; ++c) {
          std::string w = mutator.mutate_once();
          if (!w.empty()) what += (what.empty() ? "" : "; ") + w;
        }
        if (what.empty()) continue;
        ++cases;
        if (!quiet) {
          std::fprintf(stderr, "case %s%s --seed %llu --only-iteration %ld: %s\n",
                       path.filename().c_str(),
                       each_func ? (" --each-func --only-func " + entries[e]).c_str() : "",
                       static_cast<unsigned long long>(seed), it, what.c_str());
          std::fflush(stderr);
        }
        // A loop whose bound a change made huge runs as long as the program says: those are
        // compiled, not run.
        const bool loops = has_loop(*module);
        StatusOr<std::shared_ptr<runtime::Executable>> exe =
            runtime::Executable::compile(worker, std::move(*module));
        if (!exe.ok()) {
          ++refused;
          if (!quiet)
            std::fprintf(stderr, "  refused: %.200s\n", exe.status().to_string().c_str());
          continue;
        }
        ++compiled;
        // The cost analysis Compile counted (ir/cost.h): a count, never negative or NaN.
        const ir::Cost& cost = (*exe)->cost();
        if (!(cost.flops >= 0 && cost.transcendentals >= 0 && cost.bytes_accessed >= 0))
          std::fprintf(stderr, "  negative or NaN cost\n");
        if (!run || loops) continue;
        Status r = run_once(**exe, worker);
        ++ran;
        if (!quiet) std::fprintf(stderr, "  ran: %.200s\n", r.ok() ? "ok" : r.to_string().c_str());
      }
    }
  }
  std::printf("%zu cases: %zu refused at compile time, %zu compiled, %zu run\n", cases, refused,
              compiled, ran);
  std::fflush(stdout);
  // Every task posted so far (the last runs' lazy frees, executables' releases) runs and drops
  // its share of the worker before main returns, so that the worker is joined here: a worker
  // still running MLX work at exit races the destructor of MLX's static allocator (ASan saw a
  // double free in its buffer cache at exit once, seed 1770; not reproduced in three reruns).
  (void)worker->run_sync([] { return Status(); });
  worker.reset();
  return 0;
}
