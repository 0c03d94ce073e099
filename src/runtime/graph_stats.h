// Graph statistics for the benchmarks: with JAXMLX_GRAPH_STATS=<file>, every run appends one line
// naming the program and counting the MLX primitives it is about to evaluate, by primitive name
// ("run jit_step 412 Add=31 Broadcast=90 ..."). Each primitive is one kernel launch on a GPU and
// one scheduler task on MLX's CPU, so the count is what a run costs beyond its arithmetic;
// `bench/graph_count.py` sets it beside native MLX's graph of the same model. Views that cost no
// kernel (reshapes, broadcasts of contiguous data) are counted too: the names tell them apart.
// Loop bodies evaluated inside a run (while, scan) are not in the count; whether each is replayed
// or interpreted is (record_region_stats).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mlx/array.h"

namespace jaxmlx::runtime {

// Primitive name (spaces as '_', "Scatter_Sum") -> how many of the unevaluated graph behind
// `outputs` have it; a primitive with several outputs counts once.
std::map<std::string, int> primitive_counts(const std::vector<mlx::core::array>& outputs);

// The part of the graph behind `outputs` yet to be scheduled (arrays that earlier evaluations
// have not reached): its primitives, counted up to `max_primitives`, and the bytes of every array
// in it and of the arrays it reads (a bound on the memory its kernels touch).
struct PendingGraph {
  size_t primitives = 0;
  size_t bytes = 0;
};
PendingGraph pending_graph(const std::vector<mlx::core::array>& outputs, size_t max_primitives);

// Appends `program`'s line for the unevaluated graph behind `outputs` (no-op when disabled); with
// JAXMLX_GRAPH_DOT=<file> too, writes that graph to the file as Graphviz (mx::export_to_dot),
// replacing the previous run's: which arrays feed which primitive.
void record_graph_stats(std::string_view program, const std::vector<mlx::core::array>& outputs);

// Appends "region <program> replayed" when a loop region (a while's condition or body) of
// `program` is first run and will be replayed as a traced graph, or "region <program>
// interpreted <why>" when each of its iterations is lowered again instead (no-op when disabled).
void record_region_stats(std::string_view program, bool replayed, std::string_view why);

// A profiler for finding where a run's time goes, with JAXMLX_PROFILE=<file> (no-op without):
// evaluates the unevaluated graph behind `outputs` one primitive at a time, in dependency order,
// waiting for each (its stream synchronized), and appends one line per run: "profile <program>
// <total us> <name>=<count>:<us> ...", names by descending time. Each time is the primitive's
// host work, its kernel and the wait; a wait per primitive serializes what MLX would overlap,
// so the sum exceeds a normal run, and no two primitives fuse. `bench/profile.py` sums the lines.
void profile_graph(std::string_view program, const std::vector<mlx::core::array>& outputs);

// Host time by phase, with JAXMLX_HOST_TIMES=<file> (no-op without): a HostTimer adds the wall
// time of its scope to its phase, on whichever thread it runs (a run is made on jax's calling
// thread on CUDA, often on MLX's CPU too, else on the device worker). Each time a phase has
// been timed a multiple of 64 times, one line is appended, each phase's count, mean µs over all
// its timings and mean µs over its last 64 (0 before its 64th): "host_times
// execute=128:601.1:560.2 runtime=128:583.3:541.0 run=128:89.0:80.3 issue=128:556.0:470.9".
// A step's time outside `execute` is jax's and Python's.
enum class HostPhase {
  kExecute,    // PJRT_LoadedExecutable_Execute, whole
  kRuntime,    // of which the runtime's part: the run, made here or handed to the worker
  kRun,        // of which building the run's MLX graph (trace, replay or interpretation)
  kIssue,      // and handing it to MLX (async_eval: its primitives' host work, kernel launches;
               // a synchronous run's eval waits for its kernels too)
  kCount
};
class HostTimer {
 public:
  explicit HostTimer(HostPhase phase);
  ~HostTimer();
  HostTimer(const HostTimer&) = delete;
  HostTimer& operator=(const HostTimer&) = delete;

 private:
  HostPhase phase_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace jaxmlx::runtime
