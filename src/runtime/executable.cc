// Executable: passes + lowerability check at compile time; replay at run time.
//
// Replay (GraphMode below): a program without host reads (no while/case/if) is traced once into
// an mx::compile'd function whose inputs are the program arguments followed by every constant
// (never captured: captured arrays are baked into kernels by value), and replayed on later
// calls; loop bodies and conditions are replayed the same way (RegionCache). If tracing or
// running a fused graph throws (e.g. MLX's "[compile] Too many inputs/outputs fused"), that run
// is redone eagerly and the executable stays eager. Programs with control flow run through the
// Interpreter each call (lazy graphs; loops read conditions as needed). While tracing, rules still
// see the constants' values (lower::TracedConstants), and on the CPU the traced graph's
// elementwise chains become one primitive each (cpu_fusion.h).
//
// Completion on MLX's CPU (no fused kernels, no host callbacks): the worker async_evals a
// run's outputs and queues a task on MLX's stream right behind its kernels; that task sets the
// output buffers' ready events. The worker never waits for a run, and the caller is woken by
// MLX's stream thread directly (bench/README.md, "Where the time goes").
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <limits>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/fault_injection.h"
#include "ir/json.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lower/dtypes.h"
#include "lower/host_callback.h"
#include "lower/interpreter.h"
#include "lower/util.h"
#include "mlx/compile_impl.h"
#include "mlx/mlx.h"
#include "mlx/primitives.h"
#include "mlx/scheduler.h"
#include "passes/pipeline.h"
#include "passes/value_calls.h"
#include "runtime/constant_inputs.h"
#include "runtime/cpu_fusion.h"
#include "runtime/device_scalars.h"
#include "runtime/executable.h"
#include "runtime/gpu_fusion.h"
#include "runtime/graph_stats.h"
#include "runtime/memory_governor.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

using lower::Values;

// Carries a Status out of the function mx::compile traces (it can only throw).
struct TraceError : std::exception {
  explicit TraceError(Status s) : status(std::move(s)), text(status.to_string()) {}
  const char* what() const noexcept override { return text.c_str(); }
  Status status;
  std::string text;
};

// Where each program output comes from: an argument, a constant, or the compiled function.
struct OutputSource {
  enum Kind { kArg, kConst, kComputed } kind = kComputed;
  size_t index = 0;
};

StatusOr<mx::array> placeholder(const ir::Type* t) {
  if (t->is_token()) return mx::array(false);
  std::optional<mx::Dtype> dt = lower::storage_dtype(t->dtype);
  if (!dt || !t->ranked) return unimplemented("argument type " + ir::type_to_string(*t));
  mx::Shape shape;
  for (int64_t d : t->dims) {
    if (d == ir::kDynamic) return unimplemented("dynamic shapes (" + ir::type_to_string(*t) + ")");
    shape.push_back(static_cast<int32_t>(d));
  }
  if (int extra = lower::storage_trailing_dim(t->dtype)) shape.push_back(extra);
  return mx::zeros(shape, *dt);
}

size_t saturating_add(size_t a, size_t b) {
  return a > std::numeric_limits<size_t>::max() - b ? std::numeric_limits<size_t>::max() : a + b;
}

// Bytes of a value of static type `t` in MLX storage (saturating; 0 for tokens).
size_t static_bytes(const ir::Type* t) {
  if (t == nullptr || t->is_token() || !t->ranked) return 0;
  size_t bytes = static_cast<size_t>(ir::element_storage_bytes(t->dtype));
  for (int64_t d : t->dims) {
    if (d <= 0) return 0;
    size_t n = static_cast<size_t>(d);
    bytes = bytes > std::numeric_limits<size_t>::max() / n ? std::numeric_limits<size_t>::max()
                                                            : bytes * n;
  }
  return bytes;
}

TensorSpec spec_of(const ir::Type* t) {
  // A token argument or result of @main (jax's ordered effects) is a pred[0] buffer, as with
  // XLA's PJRT clients.
  if (t->is_token()) return TensorSpec{ir::ElementType::kPred, {0}};
  TensorSpec s;
  s.dtype = t->dtype;
  s.dims = t->dims;
  return s;
}

// Whether a concrete layout jax asked for a result (mhlo.layout_mode "{1,0}": minor-to-major
// dims) is the row-major order every array of ours has. Dims of size 1 may sit anywhere.
// "default" and "auto" leave the layout to us; a token has none.
bool row_major_layout(std::string_view mode, const ir::Type* t) {
  if (t->is_token() || mode.size() < 2 || mode.front() != '{' || mode.back() != '}') return true;
  std::vector<int64_t> minor_to_major;
  std::string_view body = mode.substr(1, mode.size() - 2);
  while (!body.empty()) {
    size_t comma = body.find(',');
    std::string_view item = body.substr(0, comma);
    int64_t d = 0;
    for (char c : item) {
      if (c == ' ') continue;
      if (c < '0' || c > '9') return false;  // tiles ("{1,0:T(8,128)}") or anything else
      d = d * 10 + (c - '0');
    }
    minor_to_major.push_back(d);
    body = comma == std::string_view::npos ? std::string_view() : body.substr(comma + 1);
  }
  if (minor_to_major.size() != t->dims.size()) return false;
  int64_t expect = static_cast<int64_t>(t->dims.size()) - 1;  // the next non-unit minor dim
  for (int64_t d : minor_to_major) {
    if (d < 0 || d >= static_cast<int64_t>(t->dims.size())) return false;
    if (t->dims[d] == 1) continue;
    while (expect >= 0 && t->dims[expect] == 1) --expect;
    if (d != expect) return false;
    --expect;
  }
  return true;
}

// The results of @main whose asked layout (jax's Format / Layout, as mhlo.layout_mode) is not
// row-major: arrays here are row-major only, and a result must not come back in another layout
// than the one asked without a word. An argument's asked layout needs no refusal: the program
// reports row-major parameter layouts, and jax hands it its arguments in them.
std::vector<std::string> find_other_layouts(const ir::Func& f) {
  std::vector<std::string> out;
  for (size_t i = 0; i < f.result_attrs.size() && i < f.result_types.size(); ++i) {
    const ir::Attribute* a = f.result_attrs[i].find("mhlo.layout_mode");
    const ir::StringAttr* mode = a ? a->as<ir::StringAttr>() : nullptr;
    if (mode && !row_major_layout(mode->value, f.result_types[i]))
      out.push_back("result " + std::to_string(i) + ": layout " + mode->value +
                    " (minor to major)");
  }
  return out;
}

// How a program's MLX graph is built on each run.
//   kEager   the interpreter lowers every op again on each run.
//   kReplay  traced once through mx::compile with MLX's compile mode at no_fuse (the graph is
//            kept and simplified, no fused kernels are built) and replayed: later runs skip the
//            interpreter. Values are those of kEager: the same primitives run.
//   kFused   the same, with MLX's kernel fusion.
// JAXMLX_COMPILE=0 / replay / 1 picks one; by default Metal fuses and the others replay.
// Fusion elsewhere: MLX's CPU backend builds each new fused kernel with the host C++ compiler
// (seconds each). On MLX's CUDA backend (measured on an H200, mlx-cuda-13 0.32.4) fused kernels
// contract a*b+c into FMAs (29 % of jax.random's f32 bits one ULP off the CPU backend), a
// threefry uint8 program never finished and processes died of SIGFPE mid-suite, and compiling
// took 80-90 s per training step.
enum class GraphMode { kEager, kReplay, kFused };

GraphMode graph_mode(const DeviceWorker& worker) {
  const char* v = std::getenv("JAXMLX_COMPILE");
  if (v != nullptr && *v != '\0') {
    if (std::string_view(v) == "0") return GraphMode::kEager;
    if (std::string_view(v) == "replay") return GraphMode::kReplay;
    return GraphMode::kFused;
  }
  return worker.info().is_metal ? GraphMode::kFused : GraphMode::kReplay;
}

// What rewrites a replayed graph's elementwise chains: our CPU fusion (JAXMLX_CPU_FUSION, on by
// default), or on a GPU MLX's Compiled kernels without contracted multiply-adds
// (JAXMLX_GPU_FUSION, on by default on CUDA). kFused leaves fusion to MLX. JAXMLX_GPU_FUSION=1 on
// MLX's CPU applies CUDA's rewrite there (kernels built by the host compiler, seconds each): the
// chains a CUDA run would fuse, counted or checked on a machine without a GPU.
using ChainFuser = int (*)(std::vector<mx::array>&);

int fuse_on_gpu(std::vector<mx::array>& outputs) { return fuse_gpu_elementwise(outputs); }
int fuse_as_on_gpu(std::vector<mx::array>& outputs) {
  return fuse_gpu_elementwise(outputs, mx::Device::cpu, FusedArithmetic::kRounded);
}

bool is_gpu_fusion(ChainFuser f) { return f == &fuse_on_gpu || f == &fuse_as_on_gpu; }

// What a traced graph goes through before MLX keeps it for replay: its elementwise chains fused,
// then the scalars it reads moved to GPU memory (device_scalars.h).
void rewrite_traced(std::vector<mx::array>& computed, ChainFuser fuse, bool device_scalars) {
  if (fuse) fuse(computed);
  if (device_scalars) place_scalars_on_device(computed);
}

ChainFuser chain_fuser(GraphMode mode, bool gpu) {
  if (mode != GraphMode::kReplay) return nullptr;
  if (gpu) return gpu_fusion_enabled() ? &fuse_on_gpu : nullptr;
  if (gpu_fusion_forced()) return &fuse_as_on_gpu;
  return cpu_fusion_enabled() ? &fuse_cpu_elementwise : nullptr;
}

// MLX reads its (process-wide) compile mode when a compiled function traces: its first call, or
// a call whose input shapes it has not seen. In kReplay every call runs under no_fuse, and the
// mode goes back to MLX's default afterwards (there is no getter: "enabled", as MLX starts
// unless MLX_DISABLE_COMPILE is set, in which case mx::compile does not trace at all and
// nothing is touched). A user's own mx.compile tracing on another thread in that window would not
// fuse either: slower, never different.
class TraceModeScope {
 public:
  explicit TraceModeScope(bool no_fuse) : active_(no_fuse && !mlx_compile_disabled()) {
    if (active_) mx::set_compile_mode(mx::CompileMode::no_fuse);
  }
  ~TraceModeScope() {
    if (active_) mx::set_compile_mode(mx::CompileMode::enabled);
  }
  TraceModeScope(const TraceModeScope&) = delete;
  TraceModeScope& operator=(const TraceModeScope&) = delete;

 private:
  static bool mlx_compile_disabled() {
    static const bool disabled = std::getenv("MLX_DISABLE_COMPILE") != nullptr;
    return disabled;
  }
  bool active_;
};

using CompiledFn = std::function<std::vector<mx::array>(const std::vector<mx::array>&)>;

// A program's replayed function, callable from the worker and from a thread running in its
// place (DeviceWorker::run_here_if_idle). MLX keeps one compile cache per thread (each thread
// traces once), and mx::compile erases a function's traced graph only from the cache of the
// thread that made it: this one erases it from every cache that traced it, and its key is a
// process-unique number, never an address a later function could reuse and be handed an old
// graph for.
class ReplayedFn {
 public:
  ReplayedFn() = default;
  ~ReplayedFn() { reset(); }
  ReplayedFn(const ReplayedFn&) = delete;
  ReplayedFn& operator=(const ReplayedFn&) = delete;

  void set(CompiledFn traced) {
    reset();
    static std::atomic<std::uintptr_t> next_id{std::uintptr_t{1} << 62};
    id_ = next_id.fetch_add(1);
    fn_ = mx::detail::compile(std::move(traced), id_);
  }
  explicit operator bool() const { return static_cast<bool>(fn_); }

  // On the worker or a thread acting as it (one at a time).
  std::vector<mx::array> operator()(const std::vector<mx::array>& xs) {
    mx::detail::CompileCacheWeakPtr cache = mx::detail::compile_cache();
    bool known = false;
    for (const auto& c : caches_) known |= !c.owner_before(cache) && !cache.owner_before(c);
    if (!known) caches_.push_back(cache);
    return fn_(xs);
  }

  // Any thread: MLX's caches take erasures from other threads.
  void reset() {
    for (const auto& c : caches_) mx::detail::compile_erase(c, id_);
    caches_.clear();
    fn_ = nullptr;
  }

 private:
  std::uintptr_t id_ = 0;
  CompiledFn fn_;
  std::vector<mx::detail::CompileCacheWeakPtr> caches_;
};

// On MLX's CPU, replayed programs of at most this many MLX primitives, whose graph's arrays
// (inputs and intermediates) add up to at most this many bytes, run on the calling thread when
// the worker is idle and MLX's streams have no backlog: building their graph costs the caller
// less than the hand-off to the worker (bench/README.md, "Runs on the calling thread"). A larger
// graph is built on the worker while the caller goes on, and so is one with more data: MLX's
// eval waits for its stream once ~100 kernels are in flight, and that wait should not hold up
// the caller of a long run (decode_token of the benchmarks: 126 primitives, 5.3 MB).
// On CUDA the caller builds and issues any replayed program, as native MLX does on the thread
// that calls it: the GPU computes on, and MLX's CUDA backend counts a task per batch of kernels,
// not per kernel (bench/README.md, "GPU runs completed asynchronously").
constexpr size_t kCallerRunPrimitives = 256;
constexpr size_t kCallerRunBytes = size_t{8} << 20;
// A CUDA run of at most this many primitives and bytes made on the calling thread is waited
// for there: its kernels take microseconds (a jitted `x + 1`, one eager op), and waiting saves
// the hand-offs to the completion thread and back (the H200's dispatch row: 36.6 us per call
// waited on the caller, 83 us completed on the completion thread; bench/README.md). With
// JAXMLX_GPU_ASYNC=0 every CUDA run is waited for by the thread that runs it, and the caller
// takes only runs this small, the rest is left to the worker so that the caller goes on while
// the GPU works (bench/README.md, "Runs on the calling thread on CUDA").
constexpr size_t kCallerWaitPrimitives = 8;
constexpr size_t kCallerWaitBytes = size_t{1} << 20;

// JAXMLX_GPU_ASYNC, read at each compile: `0` has the thread that runs a program on MLX's CUDA
// backend wait for its kernels, as before the completion thread (for same-process comparisons,
// bench/env_ab.py).
bool gpu_async_enabled() {
  const char* v = std::getenv("JAXMLX_GPU_ASYNC");
  return v == nullptr || std::string_view(v) != "0";
}

// JAXMLX_COMPLETION_THREAD=1 completes runs on MLX's CPU as CUDA's are
// (DeviceWorker::completions()), so that the tests of that path run where there is no GPU.
bool completion_thread_forced() {
  static const bool forced = [] {
    const char* v = std::getenv("JAXMLX_COMPLETION_THREAD");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return forced;
}

// Once a process's first run is evaluated or issued, MLX has made its kernel caches: the exit
// drain is registered again, to run before their destructors too
// (DeviceWorker::drain_at_exit_before_mlx).
void drain_at_exit_after_first_run() {
  static std::once_flag once;
  std::call_once(once, DeviceWorker::drain_at_exit_before_mlx);
}

// Replays while conditions and bodies (without nested control flow) as compiled graphs. Inputs
// of each graph: the region's arguments, the outer values it reads, and its constants.
class RegionCache final : public lower::RegionRunner {
 public:
  RegionCache(std::string program, const lower::ProgramInfo& info, const Values& constants,
              const ConstantInputs& const_inputs, GraphMode mode, ChainFuser fuse,
              bool device_scalars)
      : program_(std::move(program)), info_(info), constants_(constants),
        const_inputs_(const_inputs), mode_(mode), fuse_(fuse), device_scalars_(device_scalars) {}

  std::optional<StatusOr<Values>> run(lower::Interpreter& interp, const ir::Region& region,
                                      const Values& args) override;

 private:
  struct Entry {
    bool analyzed = false, usable = false;
    std::vector<uint32_t> free_ids;  // values of enclosing blocks the region reads
    std::vector<size_t> const_idx;   // constants (indices into constants_) inside the region
    std::vector<OutputSource> sources;  // kArg: region argument, kConst: free value index
    size_t num_computed = 0;
    CompiledFn fn;
  };
  void analyze(Entry& e, const ir::Region& region);
  std::string analyze_usable(Entry& e, const ir::Region& region);
  CompiledFn make_fn(Entry& e, const ir::Func& f, const ir::Region& region, size_t nargs);

  const std::string program_;
  const lower::ProgramInfo& info_;
  const Values& constants_;
  const ConstantInputs& const_inputs_;  // what the traced graphs are given for constants_
  const GraphMode mode_;
  const ChainFuser fuse_;  // on the traced graphs, when set
  const bool device_scalars_;  // the traced graphs' scalars in GPU memory
  std::unordered_map<const ir::Region*, Entry> entries_;
};

void RegionCache::analyze(Entry& e, const ir::Region& region) {
  e.analyzed = true;
  std::string why = analyze_usable(e, region);
  record_region_stats(program_, e.usable, why);  // JAXMLX_GRAPH_STATS
}

// Fills `e` for a region that can be replayed (e.usable); otherwise says why not.
std::string RegionCache::analyze_usable(Entry& e, const ir::Region& region) {
  if (region.blocks.size() != 1) return "several blocks";
  std::unordered_set<uint32_t> defined;
  std::string host;
  for (const ir::Value& a : region.entry().args) defined.insert(a.id);
  ir::walk(region, [&](const ir::Op& op) {
    for (const ir::Value& r : op.results) defined.insert(r.id);
    for (const ir::Region& r : op.regions)
      for (const ir::Block& b : r.blocks)
        for (const ir::Value& a : b.args) defined.insert(a.id);
    if (!host.empty()) return;
    if (op.kind == ir::OpKind::kWhile || op.kind == ir::OpKind::kCase ||
        op.kind == ir::OpKind::kIf || op.kind == ir::OpKind::kFuncCall)
      host = "nested control flow";
    else if (op.kind == ir::OpKind::kCustomCall && !passes::is_value_call(op))
      host = "custom_call @" + std::string(op.get_string("call_target_name"));
    if (auto it = info_.constant_index.find(&op); it != info_.constant_index.end())
      e.const_idx.push_back(it->second);
  });
  if (!host.empty()) return host;
  std::unordered_set<uint32_t> seen;
  ir::walk(region, [&](const ir::Op& op) {
    for (const ir::Value& v : op.operands)
      if (!defined.count(v.id) && seen.insert(v.id).second) e.free_ids.push_back(v.id);
  });
  const ir::Block& b = region.entry();
  if (b.ops.empty()) return "no ops";
  for (const ir::Value& v : b.ops.back().operands) {
    OutputSource s;
    for (size_t i = 0; i < b.args.size(); ++i)
      if (b.args[i].id == v.id) s = {OutputSource::kArg, i};
    for (size_t i = 0; s.kind == OutputSource::kComputed && i < e.free_ids.size(); ++i)
      if (e.free_ids[i] == v.id) s = {OutputSource::kConst, i};
    if (s.kind == OutputSource::kComputed) s.index = e.num_computed++;
    e.sources.push_back(s);
  }
  e.usable = true;
  return "";
}

CompiledFn RegionCache::make_fn(Entry& e, const ir::Func& f, const ir::Region& region,
                                size_t nargs) {
  return mx::compile([this, &e, &f, &region, nargs](const std::vector<mx::array>& in) {
    Values args(in.begin(), in.begin() + nargs);
    std::vector<std::pair<uint32_t, mx::array>> bound;
    for (size_t i = 0; i < e.free_ids.size(); ++i) bound.emplace_back(e.free_ids[i], in[nargs + i]);
    Values consts = constants_;
    std::vector<mx::array> placeholders, values;
    for (size_t j = 0; j < e.const_idx.size(); ++j) {
      const size_t c = e.const_idx[j];
      consts[c] = const_inputs_.expand(c, in[nargs + e.free_ids.size() + j]);
      placeholders.push_back(consts[c]);
      values.push_back(constants_[c]);
    }
    lower::TracedConstants known(placeholders, values);
    lower::Interpreter t(info_, lower::Registry::global(), lower::RunMode::kTrace, &consts);
    StatusOr<Values> out = t.run_region(f, region, bound, args);
    if (!out.ok()) throw TraceError(out.status());
    std::vector<mx::array> computed;
    for (size_t i = 0; i < e.sources.size(); ++i)
      if (e.sources[i].kind == OutputSource::kComputed) computed.push_back((*out)[i]);
    rewrite_traced(computed, fuse_, device_scalars_);
    return computed;
  });
}

std::optional<StatusOr<Values>> RegionCache::run(lower::Interpreter& interp,
                                                 const ir::Region& region, const Values& args) {
  const ir::Func* f = interp.current_func();
  Entry& e = entries_[&region];
  if (!e.analyzed) analyze(e, region);
  if (!e.usable || f == nullptr) return std::nullopt;
  std::vector<mx::array> xs = args;
  Values free_values;
  for (uint32_t id : e.free_ids) {
    StatusOr<mx::array> v = interp.value(id);
    if (!v.ok()) return std::nullopt;
    free_values.push_back(*v);
  }
  xs.insert(xs.end(), free_values.begin(), free_values.end());
  for (size_t c : e.const_idx) xs.push_back(const_inputs_.input(c));
  std::vector<mx::array> computed;
  if (e.num_computed > 0) {
    try {
      if (!e.fn) e.fn = make_fn(e, *f, region, args.size());
      TraceModeScope scope(mode_ == GraphMode::kReplay);
      computed = e.fn(xs);
    } catch (const std::exception& err) {
      e.usable = false;  // interpreting it reports any real error with the op's name
      e.fn = nullptr;
      record_region_stats(program_, false, std::string("its trace failed: ") + err.what());
      return std::nullopt;
    }
  }
  Values out;
  for (const OutputSource& s : e.sources) {
    switch (s.kind) {
      case OutputSource::kArg: out.push_back(args[s.index]); break;
      case OutputSource::kConst: out.push_back(free_values[s.index]); break;
      case OutputSource::kComputed: out.push_back(computed[s.index]); break;
    }
  }
  return StatusOr<Values>(std::move(out));
}

class ExecutableImpl final : public Executable,
                             public std::enable_shared_from_this<ExecutableImpl> {
 public:
  ExecutableImpl(std::shared_ptr<DeviceWorker> worker, ir::Module module, ir::Cost cost)
      : worker_(std::move(worker)), module_(std::move(module)), cost_(cost) {}

  ~ExecutableImpl() override {
    compiled_.reset();  // out of every thread's compile cache (ReplayedFn)
    // The region functions' graphs are in the worker's compile cache: released on the worker.
    if (!worker_) return;
    worker_->post([consts = std::move(constants_), inputs = std::move(const_inputs_),
                   regions = std::move(regions_), seed = std::move(marker_seed_)]() mutable {
      regions.reset();
      inputs = ConstantInputs();
      consts.clear();
      seed.reset();
    });
    // The last reference to an execution often dies on the worker itself; the worker cannot
    // join its own thread, so a helper thread drops our reference to it.
    if (worker_->on_worker_thread() && worker_.use_count() == 1)
      std::thread([w = std::move(worker_)]() mutable { w.reset(); }).detach();
  }

  Status init();

  const std::string& name() const override { return name_; }
  const std::string& fingerprint() const override { return fingerprint_; }
  const std::vector<TensorSpec>& inputs() const override { return inputs_; }
  const std::vector<TensorSpec>& outputs() const override { return outputs_; }
  std::string program_text() const override { return ir::print_module(module_); }
  const ir::Cost& cost() const override { return cost_; }

  void execute(std::vector<std::shared_ptr<Buffer>> inputs,
               std::vector<std::shared_ptr<Buffer>> outputs, Event done,
               std::vector<bool> donated) override;

 private:
  Status trial();  // on the worker
  Status check_on_worker();
  Status checked();  // trial() once, on the worker
  // Runs the program; the eager path returns the lazy graph (loops with compiled regions are
  // evaluated), which the caller evaluates once it dropped its references to the arguments.
  StatusOr<Values> run(const Values& args);
  StatusOr<Values> run_compiled(const Values& args);
  StatusOr<Values> run_eager(const Values& args, bool evaluate);
  // Starts evaluating `outs` and leaves signalling to a task on MLX's CPU stream, or on CUDA to
  // the DeviceWorker::completions() thread; false (nothing started) when some output is
  // computed on another stream.
  bool finish_async(Values& outs, const std::vector<std::shared_ptr<Buffer>>& outputs,
                    const Event& done);
  // The task that signals a run's `outputs` and `done` once `wait_for_kernels` returns (or
  // with the error it throws).
  std::function<void()> completion(std::function<void()> wait_for_kernels, Values outs,
                                   std::vector<std::shared_ptr<Buffer>> outputs, Event done) const;
  void plan_outputs();

  std::shared_ptr<DeviceWorker> worker_;
  ir::Module module_;
  ir::Cost cost_;
  const ir::Func* entry_ = nullptr;
  lower::ProgramInfo info_;
  std::string name_, fingerprint_;
  std::vector<TensorSpec> inputs_, outputs_;
  std::vector<OutputSource> sources_;
  size_t num_computed_ = 0;
  size_t computed_bytes_ = 0;  // bytes of the outputs each run allocates (memory governor)
  size_t constant_bytes_ = 0;  // bytes of constant outputs, allocated by the first run

  // Worker-only state.
  Values constants_;
  ConstantInputs const_inputs_;  // constants_ as the traced graphs take them (set when ready)
  bool constants_ready_ = false;
  GraphMode mode_ = GraphMode::kEager;
  // Chains of elementwise primitives traced for replay become one (cpu_fusion.h, gpu_fusion.h).
  ChainFuser fuse_ = nullptr;
  bool device_scalars_ = false;  // traced graphs' scalars and small constants in GPU memory
  bool use_compiled_ = false;
  std::shared_future<Status> deferred_check_;  // trial() left queued by check_on_worker
  std::optional<Status> trial_status_;          // set once trial() ran
  bool calls_host_ = false;                      // has host callbacks
  // MLX on the CPU and CUDA: a run's outputs are signalled by a task queued behind its kernels
  // (on MLX's CPU stream; on CUDA on the DeviceWorker::completions() thread, which waits for
  // them), so the thread that runs it never waits for them (set in init).
  bool async_completion_ = false;
  std::optional<mx::array> marker_seed_;  // what CUDA runs' completion markers depend on
  bool caller_runs_ = false;  // may run on the calling thread (set in init)
  ReplayedFn compiled_;
  // Runs may be made on the calling thread (DeviceWorker::run_here_if_idle): a replayed,
  // asynchronously completed program, after its first run on the worker (on the CPU within
  // kCallerRunPrimitives and kCallerRunBytes), or with JAXMLX_GPU_ASYNC=0 a GPU one within
  // kCallerWaitPrimitives and kCallerWaitBytes; or one that computes nothing. Set on the
  // worker, read by callers.
  std::atomic<bool> runs_on_caller_{false};
  // An asynchronously completed GPU run within kCallerWaitPrimitives and kCallerWaitBytes: made
  // on the calling thread, that thread waits for its kernels (set on the worker at the first
  // run, read by callers).
  std::atomic<bool> caller_waits_{false};
  std::shared_ptr<RegionCache> regions_;  // compiled loop regions, when compiling is on

  // A GPU run the caller may make and wait for in the worker's place (JAXMLX_GPU_ASYNC=0):
  // replayed, without fused kernels (built, and possibly redone, on the worker) or host
  // callbacks. Whether the worker lends its stream at all is the worker's to say (not on Metal).
  bool waits_on_caller() const {
    return worker_->info().is_gpu && !async_completion_ && !calls_host_ &&
           mode_ == GraphMode::kReplay;
  }
};

Status ExecutableImpl::init() {
  RETURN_IF_ERROR(passes::prepare_for_lowering(module_, worker_->info().is_gpu));
  ir::Func* entry = module_.find_func("main");
  if (entry == nullptr) return invalid_argument("the module has no @main function");
  entry_ = entry;
  name_ = module_.name.empty() ? "main" : module_.name;
  std::string text = ir::print_module(module_);
  fingerprint_ = ir::fnv1a64_hex({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  for (const ir::Type* t : entry_->arg_types) inputs_.push_back(spec_of(t));
  for (const ir::Type* t : entry_->result_types) outputs_.push_back(spec_of(t));

  std::vector<std::string> missing =
      lower::find_unlowerable(module_, *entry_, lower::Registry::global());
  if (!missing.empty()) {
    std::string msg = std::to_string(missing.size()) +
                      (missing.size() == 1 ? " op has" : " ops have") + " no MLX lowering:";
    for (const std::string& m : missing) msg += "\n  " + m;
    return unimplemented(msg);
  }
  std::vector<std::string> layouts = find_other_layouts(*entry_);
  if (!layouts.empty()) {
    std::string msg = "the mlx platform keeps arrays row-major; this program asks for results "
                      "in other layouts:";
    for (const std::string& l : layouts) msg += "\n  " + l;
    return unimplemented(msg);
  }
  info_ = lower::analyze_program(module_, *entry_);
  // A host callback calls Python on every run: never capture it in a replayed graph.
  ir::walk(entry_->body, [&](const ir::Op& op) {
    if (lower::is_host_callback(op)) info_.straight_line = false, calls_host_ = true;
  });
  plan_outputs();
  // A program whose outputs alone exceed the memory limit can never run: refuse it before the
  // trial builds anything.
  size_t output_bytes = saturating_add(computed_bytes_, constant_bytes_);
  if (memory_limit() != 0 && output_bytes > memory_limit())
    return larger_than_limit("compiling " + name_ + " (its outputs)", output_bytes);
  // Then shapes that fit in memory but not in MLX's int32 dimensions (intermediates included).
  std::vector<std::string> oversized = lower::find_oversized_dims(module_, *entry_);
  if (!oversized.empty()) {
    std::string msg = "MLX holds at most 2^31 - 1 elements along one dimension (its shapes are "
                      "int32):";
    for (const std::string& line : oversized) msg += "\n  " + line;
    return unimplemented(msg);
  }
  mode_ = graph_mode(*worker_);
  fuse_ = chain_fuser(mode_, worker_->info().is_gpu);
  // Replayed graphs only: under kFused MLX writes the scalar constants its kernels read into
  // their source, which a view of a copy would stop.
  device_scalars_ = mode_ == GraphMode::kReplay && device_scalars_enabled();
  // Fused kernels are built (and may fail) when evaluated: the worker evaluates those runs
  // itself, to redo a failed one eagerly. Metal's runs are waited for on the worker (no Mac
  // here to check MLX's Metal events from a second thread).
  const DeviceInfo& dev = worker_->info();
  async_completion_ = !calls_host_ && mode_ != GraphMode::kFused &&
                      (!dev.is_gpu || (!dev.is_metal && gpu_async_enabled()));
  use_compiled_ = info_.straight_line && num_computed_ > 0 && mode_ != GraphMode::kEager;
  // A program that computes nothing (it returns arguments or constants) has no graph to build.
  caller_runs_ = (use_compiled_ || (info_.straight_line && num_computed_ == 0)) &&
                 (async_completion_ || waits_on_caller());
  if (mode_ != GraphMode::kEager && !info_.straight_line)
    regions_ =
        std::make_shared<RegionCache>(name_, info_, constants_, const_inputs_, mode_, fuse_,
                                     device_scalars_);
  return check_on_worker();
}

void ExecutableImpl::plan_outputs() {
  const ir::Block& body = entry_->entry();
  if (body.ops.empty()) return;
  const ir::Op& ret = body.ops.back();
  for (const ir::Value& v : ret.operands) {
    OutputSource s;
    for (size_t i = 0; i < entry_->args().size(); ++i)
      if (entry_->args()[i].id == v.id) s = {OutputSource::kArg, i};
    const std::vector<const ir::Op*>& d = info_.defs.at(entry_);
    if (s.kind == OutputSource::kComputed && v.id < d.size() && d[v.id] &&
        info_.constant_index.count(d[v.id]))
      s = {OutputSource::kConst, info_.constant_index.at(d[v.id])};
    if (s.kind == OutputSource::kComputed) s.index = num_computed_++;
    size_t& bytes = s.kind == OutputSource::kComputed ? computed_bytes_ : constant_bytes_;
    if (s.kind != OutputSource::kArg) bytes = saturating_add(bytes, static_bytes(v.type));
    sources_.push_back(s);
  }
}

// Runs trial() on the worker and waits for it, unless the worker is (or gets) inside a host
// callback, or a jaxlib callback runs on one of our threads (runtime/event.h): those wait for
// Python's GIL, which jaxlib holds while it compiles. Then the check stays queued (FIFO: it runs
// before any execution of this program), and execute reports its error.
Status ExecutableImpl::check_on_worker() {
  if (worker_->on_worker_thread()) return checked();
  auto result = std::make_shared<std::promise<Status>>();
  std::shared_future<Status> done = result->get_future().share();
  worker_->post([self = shared_from_this(), result] { result->set_value(self->checked()); });
  if (!DeviceWorker::wait_unless_python_blocks([&] {
        return done.wait_for(std::chrono::milliseconds(2)) == std::future_status::ready;
      })) {
    deferred_check_ = done;
    return Status();
  }
  return done.get();
}

// A run posted from inside a host callback runs inline on the worker, ahead of a check still
// queued: whichever comes first does the check, so that run never waits for the queue it blocks.
Status ExecutableImpl::checked() {
  if (!trial_status_) trial_status_ = guard("compile", [&] { return trial(); });
  return *trial_status_;
}

// Creates the constants and traces the whole program once on placeholder inputs, so that rule
// refusals and shape errors surface now, naming the op.
Status ExecutableImpl::trial() {
  lower::Interpreter maker(info_, lower::Registry::global(), lower::RunMode::kTrial);
  for (const ir::Op* op : info_.constant_ops) {
    Values in;
    auto hoisted = info_.hoisted.find(op);
    if (hoisted != info_.hoisted.end())
      for (size_t i : hoisted->second.operands) in.push_back(constants_[i]);
    ASSIGN_OR_RETURN(Values v, hoisted == info_.hoisted.end()
                                   ? maker.lower_op(*op, in)
                                   : maker.lower_op_in(*hoisted->second.func, *op, in));
    constants_.push_back(v[0]);
  }
  Values args;
  for (const ir::Type* t : entry_->arg_types) {
    ASSIGN_OR_RETURN(mx::array a, placeholder(t));
    args.push_back(std::move(a));
  }
  lower::Interpreter interp(info_, lower::Registry::global(), lower::RunMode::kTrial, &constants_);
  ASSIGN_OR_RETURN(Values out, interp.run(*entry_, args));
  if (out.size() != outputs_.size()) return internal_error("@main returned a wrong result count");
  return Status();
}

void ExecutableImpl::execute(std::vector<std::shared_ptr<Buffer>> inputs,
                             std::vector<std::shared_ptr<Buffer>> outputs, Event done,
                             std::vector<bool> donated) {
  HostTimer timer(HostPhase::kRuntime);  // JAXMLX_HOST_TIMES
  auto self = shared_from_this();
  // Python waits at exit for queued runs that will call into it.
  auto pending = calls_host_ ? std::make_shared<lower::PendingHostCallbackRun>() : nullptr;
  donated.resize(inputs.size(), false);
  std::function<void()> task = [self, inputs = std::move(inputs), outputs = std::move(outputs),
                                done, pending, donated = std::move(donated)] {
    bool signalled = false;
    Status st = guard("execute", [&]() -> Status {
      if (self->deferred_check_.valid()) RETURN_IF_ERROR(self->checked());
      // Outputs are allocated by this run (constants only by the first): refuse before any is.
      size_t requested = saturating_add(self->computed_bytes_,
                                        self->constants_ready_ ? 0 : self->constant_bytes_);
      RETURN_IF_ERROR(check_memory(requested, "running " + self->name_ + " (its outputs)"));
      Values args;
      for (size_t i = 0; i < inputs.size(); ++i) {
        // A token only orders effects: never read it (a failed run's token must not fail the
        // next run); inside the program a token is a bool scalar, as lowering rules make them.
        if (self->entry_->arg_types[i]->is_token()) {
          args.push_back(mx::array(false));
          continue;
        }
        ASSIGN_OR_RETURN(mx::array a, donated[i] ? inputs[i]->take_array_on_worker()
                                                 : inputs[i]->array_on_worker());
        args.push_back(std::move(a));
      }
      fault::on_run();  // JAXMLX_FAULT=execute:N / alloc:N (base/fault_injection.h)
      std::optional<HostTimer> run_timer(HostPhase::kRun);  // JAXMLX_HOST_TIMES
      ASSIGN_OR_RETURN(Values outs, self->run(args));
      run_timer.reset();
      // A run of a few primitives made on the calling thread is waited for there (one GPU
      // round trip, no hand-off to the completion thread and back); on the worker it never is.
      const bool async = self->async_completion_ &&
                         !(self->caller_waits_.load(std::memory_order_relaxed) &&
                           self->worker_->on_borrowing_thread());
      // From here on only the graph reads the arguments: a donated one that nothing else holds
      // can lend its memory to a result (MLX reuses an input buffer it holds the only reference
      // to), as the optimizer update of a training step does with parameters and state.
      args.clear();
      if (outs.size() != outputs.size())
        return internal_error("the program produced " + std::to_string(outs.size()) +
                              " outputs for " + std::to_string(outputs.size()) + " buffers");
      for (size_t i = 0; i < outs.size(); ++i)
        if (self->entry_->result_types[i]->is_token()) outs[i] = mx::zeros({0}, mx::bool_);
      {
        HostTimer issue(HostPhase::kIssue);  // JAXMLX_HOST_TIMES
        signalled = async && self->finish_async(outs, outputs, done);
        if (!signalled) mx::eval(outs);
      }
      drain_at_exit_after_first_run();
      if (signalled) return Status();
      for (size_t i = 0; i < outs.size(); ++i) outputs[i]->set_array(outs[i]);
      return Status();
    });
    if (signalled) return;  // the completion task on MLX's stream sets the events
    if (!st.ok()) {
      st.with_context("while running " + self->name_);
      for (size_t i = 0; i < outputs.size(); ++i) {
        // A token output only orders effects: the failed run still releases the next one.
        if (self->entry_->result_types[i]->is_token())
          outputs[i]->set_array(mx::zeros({0}, mx::bool_));
        else
          outputs[i]->set_error(st);
      }
    }
    done.set(st);
  };
  if (runs_on_caller_.load(std::memory_order_acquire) && mx::scheduler::n_active_tasks() == 0 &&
      worker_->run_here_if_idle(task))
    return;
  worker_->post(std::move(task));
}

bool ExecutableImpl::finish_async(Values& outs, const std::vector<std::shared_ptr<Buffer>>& outputs,
                                  const Event& done) {
  mx::Stream stream = mx::default_stream(mx::default_device());
  bool computed = false;
  for (const mx::array& a : outs) {
    if (a.status() == mx::array::Status::unscheduled && a.primitive().stream() != stream)
      return false;
    computed |= !a.is_available();
  }
  if (!computed) {
    // Arguments or constants whose values exist already: ready now, nothing to run.
    for (size_t i = 0; i < outs.size(); ++i) outputs[i]->set_array(outs[i]);
    done.set();
    return true;
  }
  // Everything but the evaluation is prepared first, so that the completion task is queued
  // right behind the kernels, usually before MLX's stream thread has run them and gone back to
  // sleep (one thread wake-up less per run). The stored arrays are the ones evaluated below.
  for (size_t i = 0; i < outs.size(); ++i) outputs[i]->store_array(outs[i]);
  if (worker_->info().is_gpu || completion_thread_forced()) {
    // MLX's CUDA backend: the kernels are issued here, and the completion thread waits for
    // them through an array of its own (the outputs are this thread's to touch, and MLX exports
    // no wait for an event alone): a Depends on a scalar, no kernel, evaluated with the run and
    // so done once its kernels are (MLX signals one event per stream per evaluation) and the
    // earlier runs that compute outputs passed through are.
    Values after;
    bool have_this_run = false;
    for (const mx::array& a : outs) {
      if (a.status() == mx::array::Status::unscheduled) {
        if (!std::exchange(have_this_run, true)) after.push_back(a);
      } else if (!a.is_available()) {
        after.push_back(a);
      }
    }
    if (!marker_seed_) marker_seed_ = mx::array(false);
    std::optional<mx::array> marker = mx::depends({*marker_seed_}, after)[0];
    after.clear();
    Values issued = outs;
    issued.push_back(*marker);
    mx::async_eval(std::move(issued));
    DeviceWorker::completions().post(completion(
        [marker = std::move(marker)]() mutable {
          marker->wait();
          marker.reset();  // here, before the outputs are signalled
        },
        outs, outputs, done));
    return true;
  }
  // It runs after everything queued on MLX's CPU stream so far: the kernels of this run and of
  // the runs that produced its inputs. A kernel that threw on the stream left its error there
  // (and would poison later runs' events): it is this run's error.
  std::function<void()> complete =
      completion([stream] { mx::scheduler::check_error(stream); }, outs, outputs, done);
  mx::async_eval(outs);
  mx::scheduler::enqueue(stream, std::move(complete));
  return true;
}

std::function<void()> ExecutableImpl::completion(std::function<void()> wait_for_kernels,
                                                 Values outs,
                                                 std::vector<std::shared_ptr<Buffer>> outputs,
                                                 Event done) const {
  // The task holds the outputs too, so their memory outlives the kernels writing it even when
  // the buffers are freed first.
  return [wait = std::move(wait_for_kernels), keep = std::move(outs), outputs = std::move(outputs),
          done = std::move(done), name = name_]() mutable {
    DeferEventCallbacks defer;  // not our caller's thread: jaxlib's callbacks never run here
    Status st;
    try {
      wait();
      if (auto why = fault::fired(fault::Point::kKernel))  // JAXMLX_FAULT=kernel:N
        throw std::runtime_error("[scheduler] a kernel failed: " + *why);
    } catch (const std::exception& err) {
      // As on the worker's path: out of memory is the user's to fix, and the error names the run.
      st = is_allocation_failure(err)
               ? resource_exhausted(std::string("execute: out of device memory (") + err.what() +
                                    "). Use a smaller batch or raise JAXMLX_MEMORY_LIMIT "
                                    "(docs/memory.md).")
               : internal_error(std::string("execute: ") + err.what());
      st.with_context("while running " + name);
    }
    keep.clear();
    for (const std::shared_ptr<Buffer>& b : outputs) {
      if (st.ok()) {
        b->ready().set();
      } else {
        b->set_error(st);
      }
    }
    done.set(st);
  };
}

StatusOr<Values> ExecutableImpl::run(const Values& args) {
  if (!constants_ready_) {
    // Splats enter a fused graph as scalars, MLX's fusion (kFused) or ours for a GPU: a
    // broadcast splat read by a Compiled kernel keeps it off its contiguous variant. A graph
    // replayed without either, or with the CPU's fusion, keeps its primitives as they are.
    // (Made before the evaluation, which drops the broadcast that made a splat; what the traced
    // graphs are given is evaluated there, to give equal values once.)
    const_inputs_ = ConstantInputs(constants_, mode_ == GraphMode::kFused || is_gpu_fusion(fuse_),
                                   device_scalars_);
    mx::eval(constants_);
    constants_ready_ = true;
  }
  if (use_compiled_) {
    StatusOr<Values> out = Values{};
    try {
      out = run_compiled(args);
    } catch (const TraceError& e) {
      out = e.status;
    } catch (const std::exception& e) {
      if (is_allocation_failure(e)) throw;  // out of memory: not a reason to stop compiling
      out = internal_error(e.what());
    }
    if (out.ok()) return out;
    use_compiled_ = false;  // stays eager from now on; this run is redone below
    runs_on_caller_.store(false);
    compiled_.reset();
  }
  if (caller_runs_ && num_computed_ == 0) runs_on_caller_.store(true);
  if (regions_ && mode_ == GraphMode::kFused) {
    try {
      return run_eager(args, /*evaluate=*/true);
    } catch (const std::exception& e) {
      if (is_allocation_failure(e)) throw;
      regions_.reset();  // e.g. a fused kernel MLX cannot build: interpret loops from now on
    }
  }
  return run_eager(args, /*evaluate=*/false);
}

StatusOr<Values> ExecutableImpl::run_compiled(const Values& args) {
  const bool first = !compiled_;
  if (first) {
    size_t nargs = args.size();
    compiled_.set([this, nargs](const std::vector<mx::array>& xs) {
      Values a(xs.begin(), xs.begin() + nargs);
      Values consts;
      consts.reserve(constants_.size());
      for (size_t i = 0; i < constants_.size(); ++i)
        consts.push_back(const_inputs_.expand(i, xs[nargs + const_inputs_.input_index(i)]));
      lower::TracedConstants known(consts, constants_);
      lower::Interpreter interp(info_, lower::Registry::global(), lower::RunMode::kTrace, &consts);
      StatusOr<Values> out = interp.run(*entry_, a);
      if (!out.ok()) throw TraceError(out.status());
      std::vector<mx::array> computed;
      for (size_t i = 0; i < sources_.size(); ++i)
        if (sources_[i].kind == OutputSource::kComputed) computed.push_back((*out)[i]);
      rewrite_traced(computed, fuse_, device_scalars_);
      return computed;
    });
  }
  std::vector<mx::array> xs = args;
  xs.insert(xs.end(), const_inputs_.inputs().begin(), const_inputs_.inputs().end());
  std::vector<mx::array> computed;
  {
    TraceModeScope scope(mode_ == GraphMode::kReplay);
    computed = compiled_(xs);
  }
  record_graph_stats(name_, computed);  // JAXMLX_GRAPH_STATS
  profile_graph(name_, computed);       // JAXMLX_PROFILE
  if (first && caller_runs_) {
    // One walk of the graph sizes it against both limits: kCallerWait* (a run a caller may
    // wait for) and kCallerRun* (one it may run on MLX's CPU).
    const bool gpu = worker_->info().is_gpu;
    PendingGraph g = pending_graph(computed, kCallerRunPrimitives + 1);
    const bool small = g.primitives <= kCallerWaitPrimitives && g.bytes <= kCallerWaitBytes;
    if (gpu && async_completion_)
      runs_on_caller_.store(true);  // any size: the caller only issues the kernels
    else if (waits_on_caller())
      runs_on_caller_.store(small);  // a GPU run: the caller waits for its kernels
    else
      runs_on_caller_.store(g.primitives <= kCallerRunPrimitives && g.bytes <= kCallerRunBytes);
    caller_waits_.store(small && async_completion_ && (gpu || completion_thread_forced()));
  }
  if (mode_ == GraphMode::kFused) mx::eval(computed);
  Values outs;
  for (const OutputSource& s : sources_) {
    switch (s.kind) {
      case OutputSource::kArg: outs.push_back(args[s.index]); break;
      case OutputSource::kConst: outs.push_back(constants_[s.index]); break;
      case OutputSource::kComputed: outs.push_back(computed[s.index]); break;
    }
  }
  return outs;
}

StatusOr<Values> ExecutableImpl::run_eager(const Values& args, bool evaluate) {
  lower::Interpreter interp(info_, lower::Registry::global(), lower::RunMode::kExecute,
                            &constants_);
  if (regions_) interp.set_region_runner(regions_.get());
  ASSIGN_OR_RETURN(Values outs, interp.run(*entry_, args));
  record_graph_stats(name_, outs);  // JAXMLX_GRAPH_STATS
  profile_graph(name_, outs);       // JAXMLX_PROFILE
  if (evaluate) mx::eval(outs);
  return outs;
}

}  // namespace

StatusOr<std::shared_ptr<Executable>> Executable::compile(std::shared_ptr<DeviceWorker> worker,
                                                          ir::Module module) {
  if (!worker) return invalid_argument("Executable::compile needs a device worker");
  // The reader checks the bytecode; this, that the program it holds is well formed (every value
  // defined once before its uses, used as the type it was defined with, op arities): the passes
  // and lowering rules rely on it.
  RETURN_IF_ERROR(ir::verify(module));
  // Counted here, on a verified program (a malformed one's attributes may claim 2^40 elements).
  const ir::Cost cost = ir::program_cost(module);
  auto exe = std::make_shared<ExecutableImpl>(std::move(worker), std::move(module), cost);
  RETURN_IF_ERROR(exe->init());
  return std::shared_ptr<Executable>(std::move(exe));
}

}  // namespace jaxmlx::runtime
