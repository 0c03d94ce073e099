#include "runtime/graph_stats.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>

#include "mlx/graph_utils.h"
#include "mlx/primitives.h"
#include "mlx/scheduler.h"
#include "mlx/transforms.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

const char* env_path(const char* var) {
  const char* p = std::getenv(var);
  return (p != nullptr && *p != '\0') ? p : nullptr;
}

const char* stats_path() {
  static const char* path = env_path("JAXMLX_GRAPH_STATS");
  return path;
}

const char* dot_path() {
  static const char* path = env_path("JAXMLX_GRAPH_DOT");
  return path;
}

void append_line(const char* path, const std::string& line) {
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fwrite(line.data(), 1, line.size(), f);  // one write per line: lines stay whole
    std::fclose(f);
  }
}

std::string primitive_name(const mx::array& a) {
  std::string name = a.primitive().name();  // e.g. "Scatter Sum": one token per name
  for (char& c : name) c = (c == ' ') ? '_' : c;
  return name;
}

// Visits each array of the graph behind `outputs` once, outputs first; `visit(a)` says whether
// to go on into a's inputs (never for an array without a primitive).
template <typename Visit>
void walk_graph(const std::vector<mx::array>& outputs, Visit&& visit) {
  std::unordered_set<std::uintptr_t> seen;
  std::vector<mx::array> stack(outputs.begin(), outputs.end());
  while (!stack.empty()) {
    mx::array a = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(a.id()).second || !visit(a) || !a.has_primitive()) continue;
    for (const mx::array& in : a.inputs()) stack.push_back(in);
  }
}

}  // namespace

std::map<std::string, int> primitive_counts(const std::vector<mx::array>& outputs) {
  std::unordered_set<const mx::Primitive*> seen_primitives;
  std::map<std::string, int> by_name;
  walk_graph(outputs, [&](const mx::array& a) {
    if (a.has_primitive() && seen_primitives.insert(&a.primitive()).second)
      ++by_name[primitive_name(a)];
    return true;
  });
  return by_name;
}

PendingGraph pending_graph(const std::vector<mx::array>& outputs, size_t max_primitives) {
  std::unordered_set<const mx::Primitive*> seen_primitives;
  PendingGraph g;
  walk_graph(outputs, [&](const mx::array& a) {
    if (seen_primitives.size() >= max_primitives) return false;  // counted enough: stop
    g.bytes += a.nbytes();
    if (!a.has_primitive() || a.status() != mx::array::Status::unscheduled) return false;
    seen_primitives.insert(&a.primitive());
    return true;
  });
  g.primitives = seen_primitives.size();
  return g;
}

void record_graph_stats(std::string_view program, const std::vector<mx::array>& outputs) {
  if (const char* path = stats_path()) {
    const std::map<std::string, int> by_name = primitive_counts(outputs);
    int total = 0;
    for (const auto& [name, n] : by_name) total += n;
    std::string line = "run " + std::string(program) + " " + std::to_string(total);
    for (const auto& [name, n] : by_name) line += " " + name + "=" + std::to_string(n);
    append_line(path, line + "\n");
  }
  if (const char* dot = dot_path()) {
    // Each array named by a serial number, its dtype and its shape: "a12 float32[128,10]".
    mx::NodeNamer namer;
    int serial = 0;
    walk_graph(outputs, [&](const mx::array& a) {
      std::string name = "a" + std::to_string(serial++) + " ";
      std::ostringstream dtype;
      dtype << a.dtype();
      name += dtype.str() + "[";
      for (size_t d = 0; d < a.shape().size(); ++d)
        name += (d ? "," : "") + std::to_string(a.shape()[d]);
      namer.set_name(a, name + "]");
      return true;
    });
    std::ofstream os(dot, std::ios::trunc);  // the last run's graph
    mx::export_to_dot(os, std::move(namer), outputs);
  }
}

void record_region_stats(std::string_view program, bool replayed, std::string_view why) {
  const char* path = stats_path();
  if (path == nullptr) return;
  std::string line = "region " + std::string(program) + (replayed ? " replayed" : " interpreted ");
  if (!replayed) line += why;
  for (char& c : line) c = (c == '\n') ? ' ' : c;
  append_line(path, line + "\n");
}

void profile_graph(std::string_view program, const std::vector<mx::array>& outputs) {
  static const char* path = env_path("JAXMLX_PROFILE");
  if (path == nullptr) return;
  // Dependency order: a depth-first walk that emits an array after its inputs.
  std::vector<mx::array> order;
  std::unordered_set<std::uintptr_t> seen;
  std::vector<std::pair<mx::array, bool>> stack;
  for (const mx::array& o : outputs) stack.emplace_back(o, false);
  while (!stack.empty()) {
    auto [a, inputs_done] = std::move(stack.back());
    stack.pop_back();
    if (inputs_done) {
      order.push_back(std::move(a));
      continue;
    }
    if (!a.has_primitive() || a.status() != mx::array::Status::unscheduled ||
        !seen.insert(a.id()).second)
      continue;
    stack.emplace_back(a, true);
    for (const mx::array& in : a.inputs()) stack.emplace_back(in, false);
  }
  std::map<std::string, std::pair<int, double>> by_name;  // count, us
  double total = 0;
  for (mx::array& a : order) {
    if (a.status() != mx::array::Status::unscheduled) continue;  // a sibling's output
    // Evaluating detaches the array from its primitive: name it first.
    auto& [n, t] = by_name[primitive_name(a)];
    const mx::Stream s = a.primitive().stream();
    const auto t0 = std::chrono::steady_clock::now();
    mx::eval(a);
    mx::synchronize(s);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    ++n, t += us, total += us;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> rows(by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& x, const auto& y) { return x.second.second > y.second.second; });
  char buf[64];
  std::snprintf(buf, sizeof(buf), " %.1f", total);
  std::string line = "profile " + std::string(program) + buf;
  for (const auto& [name, nt] : rows) {
    std::snprintf(buf, sizeof(buf), "=%d:%.1f", nt.first, nt.second);
    line += " " + name + buf;
  }
  append_line(path, line + "\n");
}

namespace {

const char* host_times_path() {
  static const char* path = env_path("JAXMLX_HOST_TIMES");
  return path;
}

constexpr size_t kPhases = static_cast<size_t>(HostPhase::kCount);
constexpr uint64_t kWindow = 64;  // timings of a phase per line, and per recent mean
std::atomic<uint64_t> phase_ns[kPhases];
std::atomic<uint64_t> phase_calls[kPhases];
std::mutex window_mu;                // guards the two below (taken once per kWindow timings)
uint64_t window_start_ns[kPhases];   // phase_ns when the phase's last window ended
double recent_us[kPhases];           // mean of the phase's last complete window

}  // namespace

HostTimer::HostTimer(HostPhase phase) : phase_(phase), on_(host_times_path() != nullptr) {
  if (on_) start_ = std::chrono::steady_clock::now();
}

HostTimer::~HostTimer() {
  if (!on_) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start_).count();
  const size_t p = static_cast<size_t>(phase_);
  const uint64_t total = phase_ns[p].fetch_add(static_cast<uint64_t>(ns)) + ns;
  const uint64_t n = phase_calls[p].fetch_add(1) + 1;
  if (n % kWindow != 0) return;
  static const char* kNames[kPhases] = {"execute", "runtime", "run", "issue"};
  std::string line = "host_times";
  {
    // The whole-run mean carries a program's first runs (its build, NVRTC's kernel builds on
    // CUDA: seconds); the recent one is the steady state.
    std::lock_guard<std::mutex> lock(window_mu);
    recent_us[p] = static_cast<double>(total - window_start_ns[p]) / 1e3 / kWindow;
    window_start_ns[p] = total;
    for (size_t i = 0; i < kPhases; ++i) {
      const uint64_t calls = phase_calls[i].load();
      const uint64_t t = phase_ns[i].load();
      char buf[128];
      std::snprintf(buf, sizeof buf, " %s=%llu:%.1f:%.1f", kNames[i],
                    static_cast<unsigned long long>(calls),
                    calls == 0 ? 0.0 : static_cast<double>(t) / 1e3 / static_cast<double>(calls),
                    recent_us[i]);
      line += buf;
    }
  }
  append_line(host_times_path(), line + "\n");
}

}  // namespace jaxmlx::runtime
