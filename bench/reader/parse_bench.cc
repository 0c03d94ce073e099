// Times read_portable_artifact on one file; prints one JSON line (see parse_bench.py).
//
//   reader_parse_bench FILE [REPEATS]
//
// Also measures what one parse costs in memory, to show dense payloads are viewed, not copied:
// bytes requested from operator new during the parse (global new/delete are counted here), and
// the growth of the peak RSS (getrusage) across the first parse, after the input was loaded.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "ir/module.h"
#include "vhlo/read.h"

namespace {
std::atomic<uint64_t> g_alloc_bytes{0};

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

size_t count_ops(const jaxmlx::ir::Module& m) {
  size_t n = m.other_ops.size();
  for (const auto& f : m.funcs) jaxmlx::ir::walk(f.body, [&](const jaxmlx::ir::Op&) { ++n; });
  return n;
}
}  // namespace

void* operator new(size_t n) {
  g_alloc_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [REPEATS]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  std::ifstream in(argv[1], std::ios::binary);
  auto bytes = std::make_shared<std::vector<uint8_t>>(std::istreambuf_iterator<char>(in),
                                                      std::istreambuf_iterator<char>());
  if (bytes->empty()) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  std::span<const uint8_t> data(*bytes);

  const long rss0 = peak_rss_kb();
  const uint64_t alloc0 = g_alloc_bytes.load();
  size_t ops = 0;
  {
    auto m = jaxmlx::vhlo::read_portable_artifact(data, nullptr);
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.status().to_string().c_str());
      return 1;
    }
    ops = count_ops(*m);
  }
  const uint64_t alloc_bytes = g_alloc_bytes.load() - alloc0;
  const long rss_growth = peak_rss_kb() - rss0;

  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto m = jaxmlx::vhlo::read_portable_artifact(data, nullptr);
    auto t1 = std::chrono::steady_clock::now();
    if (!m.ok()) return 1;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("{\"bytes\": %zu, \"ops\": %zu, \"parse_ms_median\": %.4f, \"parse_ms_min\": %.4f, "
              "\"alloc_bytes\": %llu, \"rss_growth_kb\": %ld}\n",
              data.size(), ops, ms[ms.size() / 2], ms[0],
              static_cast<unsigned long long>(alloc_bytes), rss_growth);
  return 0;
}
