#include "base/fault_injection.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace jaxmlx::fault {
namespace {

constexpr std::string_view kPointNames[] = {"execute", "alloc", "callback", "kernel"};
constexpr size_t kNumPoints = std::size(kPointNames);

struct Entry {
  Point point;
  uint64_t n;         // the event that fails (1-based)
  bool and_later;     // "N+": every later event fails too
};

struct State {
  std::mutex mu;
  std::string spec;                  // as installed
  std::vector<Entry> entries;        // guarded by mu
  uint64_t counts[kNumPoints] = {};  // events seen since install, per point; guarded by mu
};

State& state() {
  static State* s = new State;  // never destroyed: hooks may run during static destruction
  return *s;
}

std::atomic<bool> g_armed{false};

Status bad_spec(std::string_view spec, std::string_view why) {
  return invalid_argument("JAXMLX_FAULT \"" + std::string(spec) + "\": " + std::string(why) +
                          " (expected entries point:N or point:N+ separated by commas, point "
                          "being execute, alloc, callback or kernel, N >= 1)");
}

StatusOr<Entry> parse_entry(std::string_view spec, std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) return bad_spec(spec, "\"" + std::string(text) + "\" has no ':'");
  std::string_view name = text.substr(0, colon), count = text.substr(colon + 1);
  auto it = std::find(std::begin(kPointNames), std::end(kPointNames), name);
  if (it == std::end(kPointNames)) return bad_spec(spec, "unknown point \"" + std::string(name) + "\"");
  Entry e{static_cast<Point>(it - std::begin(kPointNames)), 0, false};
  if (!count.empty() && count.back() == '+') {
    e.and_later = true;
    count.remove_suffix(1);
  }
  auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), e.n);
  if (count.empty() || ec != std::errc() || end != count.data() + count.size() || e.n == 0)
    return bad_spec(spec, "\"" + std::string(text) + "\" needs a count N >= 1 after ':'");
  return e;
}

}  // namespace

Status install(std::string_view spec) {
  std::vector<Entry> entries;
  std::string_view rest = spec;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) {
      ASSIGN_OR_RETURN(Entry e, parse_entry(spec, item));
      entries.push_back(e);
    }
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.spec = entries.empty() ? std::string() : std::string(spec);
  s.entries = std::move(entries);
  std::fill(std::begin(s.counts), std::end(s.counts), 0);
  g_armed.store(!s.entries.empty());
  return Status();
}

Status install_from_env() {
  const char* env = std::getenv("JAXMLX_FAULT");
  return env == nullptr ? Status() : install(env);
}

std::string current() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.spec;
}

std::optional<std::string> fired(Point point) {
  if (!g_armed.load(std::memory_order_relaxed)) return std::nullopt;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  uint64_t n = ++s.counts[static_cast<size_t>(point)];
  for (const Entry& e : s.entries) {
    if (e.point != point || n < e.n || (n > e.n && !e.and_later)) continue;
    return "fault injected by JAXMLX_FAULT=" + s.spec + " (" +
           std::string(kPointNames[static_cast<size_t>(point)]) + " #" + std::to_string(n) + ")";
  }
  return std::nullopt;
}

void on_run() {
  if (auto why = fired(Point::kAlloc))
    throw std::runtime_error("[malloc] Unable to allocate the program's outputs: " + *why);
  if (auto why = fired(Point::kExecute))
    throw std::runtime_error("[eval] the evaluation failed: " + *why);
}

}  // namespace jaxmlx::fault

extern "C" __attribute__((visibility("default"))) int32_t jaxmlx_set_fault(
    const char* spec, char* error, int64_t error_capacity) {
  jaxmlx::Status st = jaxmlx::fault::install(spec == nullptr ? "" : spec);
  if (st.ok()) return 0;
  if (error != nullptr && error_capacity > 0) {
    size_t n = std::min(st.message().size(), static_cast<size_t>(error_capacity - 1));
    std::memcpy(error, st.message().data(), n);
    error[n] = '\0';
  }
  return 1;
}
