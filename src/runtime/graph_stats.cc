#include "runtime/graph_stats.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_set>

#include "mlx/primitives.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

const char* stats_path() {
  static const char* path = [] {
    const char* p = std::getenv("JAXMLX_GRAPH_STATS");
    return (p != nullptr && *p != '\0') ? p : nullptr;
  }();
  return path;
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
    if (a.has_primitive() && seen_primitives.insert(&a.primitive()).second) {
      std::string name = a.primitive().name();  // e.g. "Scatter Sum": one token per name
      for (char& c : name) c = (c == ' ') ? '_' : c;
      ++by_name[name];
    }
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
  const char* path = stats_path();
  if (path == nullptr) return;
  const std::map<std::string, int> by_name = primitive_counts(outputs);
  int total = 0;
  for (const auto& [name, n] : by_name) total += n;
  std::string line = "run " + std::string(program) + " " + std::to_string(total);
  for (const auto& [name, n] : by_name) line += " " + name + "=" + std::to_string(n);
  line += "\n";
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fwrite(line.data(), 1, line.size(), f);  // one write per line: lines stay whole
    std::fclose(f);
  }
}

}  // namespace jaxmlx::runtime
