#include "runtime/memory_governor.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <stdexcept>

#include <unistd.h>

#include "mlx/memory.h"
#include "mlx/stream.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

std::atomic<size_t> g_limit{0};
std::atomic<size_t> g_adopted{0};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Status bad_size(std::string_view text, std::string_view why) {
  return invalid_argument("cannot read memory size \"" + std::string(text) + "\": " +
                          std::string(why) +
                          " (use bytes, a K/M/G/T suffix such as 8G, or a fraction such as 0.5)");
}

bool ieq(char a, char b) {
  return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
}

}  // namespace

StatusOr<size_t> parse_memory_size(std::string_view text, size_t whole) {
  std::string_view s = trim(text);
  if (s.empty()) return bad_size(text, "empty");
  if (s.find('.') != std::string_view::npos) {
    // A fraction of `whole`.
    std::string str(s);
    char* end = nullptr;
    double f = std::strtod(str.c_str(), &end);
    if (end != str.c_str() + str.size() || !std::isfinite(f))
      return bad_size(text, "not a number");
    if (f <= 0.0 || f > 1.0) return bad_size(text, "a fraction must be in (0, 1]");
    if (whole == 0) return bad_size(text, "a fraction needs the device memory, which is unknown");
    size_t bytes = static_cast<size_t>(f * static_cast<double>(whole));
    if (bytes == 0) return bad_size(text, "the fraction is less than one byte");
    return bytes;
  }
  size_t i = 0;
  size_t value = 0;
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    size_t digit = static_cast<size_t>(s[i] - '0');
    if (value > (kMax - digit) / 10) return bad_size(text, "too large");
    value = value * 10 + digit;
  }
  if (i == 0) return bad_size(text, "not a number");
  std::string_view suffix = trim(s.substr(i));
  int shift = 0;
  if (!suffix.empty()) {
    static constexpr std::string_view kUnits = "KMGT";
    size_t unit = std::string_view::npos;
    for (size_t u = 0; u < kUnits.size(); ++u)
      if (ieq(suffix.front(), kUnits[u])) unit = u;
    std::string_view rest = suffix;
    if (unit != std::string_view::npos) {
      shift = 10 * static_cast<int>(unit + 1);
      rest.remove_prefix(1);
      if (!rest.empty() && ieq(rest.front(), 'i')) rest.remove_prefix(1);
    }
    if (!rest.empty() && ieq(rest.front(), 'b')) rest.remove_prefix(1);
    if (!rest.empty() || (unit == std::string_view::npos && suffix.size() != 1))
      return bad_size(text, "unknown suffix \"" + std::string(suffix) + "\"");
  }
  if (shift > 0 && value > (kMax >> shift)) return bad_size(text, "too large");
  value <<= shift;
  if (value == 0) return bad_size(text, "the limit must be positive");
  return value;
}

MemoryLimits compute_memory_limits(const char* memory_env, const char* cache_env,
                                   size_t device_bytes, std::string* warning) {
  MemoryLimits out;
  out.limit = static_cast<size_t>(kDefaultLimitFraction * static_cast<double>(device_bytes));
  if (memory_env != nullptr) {
    StatusOr<size_t> v = parse_memory_size(memory_env, device_bytes);
    if (v.ok()) {
      out.limit = *v;
    } else if (warning != nullptr) {
      *warning += "JAXMLX_MEMORY_LIMIT ignored, using the default: " + v.status().message() + "\n";
    }
  }
  out.cache_limit = static_cast<size_t>(kDefaultCacheFraction * static_cast<double>(out.limit));
  if (cache_env != nullptr) {
    // 0 is meaningful here: no cache at all.
    std::string_view c = trim(cache_env);
    StatusOr<size_t> v = c == "0" ? StatusOr<size_t>(size_t{0}) : parse_memory_size(c, out.limit);
    if (v.ok()) {
      out.cache_limit = *v;
    } else if (warning != nullptr) {
      *warning += "JAXMLX_CACHE_LIMIT ignored, using the default: " + v.status().message() + "\n";
    }
  }
  if (out.limit != 0) out.cache_limit = std::min(out.cache_limit, out.limit);
  return out;
}

MemoryLimits configure_memory_governor(size_t device_bytes) {
  // MLX's CPU device reports no memory size: there the device memory is the machine's RAM.
  if (device_bytes == 0) {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0)
      device_bytes = static_cast<size_t>(pages) * static_cast<size_t>(page_size);
  }
  std::string warning;
  MemoryLimits limits = compute_memory_limits(std::getenv("JAXMLX_MEMORY_LIMIT"),
                                              std::getenv("JAXMLX_CACHE_LIMIT"), device_bytes,
                                              &warning);
  if (!warning.empty()) std::fprintf(stderr, "jax-mlx: %s", warning.c_str());
  g_limit.store(limits.limit);
  // MLX's own limit is a guideline for its allocator (on Metal it waits for in-flight work, then
  // throws); ours is checked before work is queued. The cache bound keeps freed buffers from
  // holding memory that live arrays need, while staying large enough that a steady training
  // loop reuses its buffers instead of returning them to the system each step.
  if (limits.limit != 0) {
    mx::set_memory_limit(limits.limit);
    mx::set_cache_limit(limits.cache_limit);
  }
  return limits;
}

size_t memory_limit() { return g_limit.load(); }

void note_adopted(size_t bytes) { g_adopted.fetch_add(bytes); }
void note_released(size_t bytes) { g_adopted.fetch_sub(bytes); }
size_t live_bytes() { return mx::get_active_memory() + g_adopted.load(); }

std::string format_bytes(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[96];
  if (u == 0)
    std::snprintf(buf, sizeof(buf), "%zu bytes", bytes);
  else
    std::snprintf(buf, sizeof(buf), "%.2f %s (%zu bytes)", v, kUnits[u], bytes);
  return buf;
}

namespace {
constexpr const char* kAdvice =
    ". Use a smaller batch, donate buffers you no longer need, delete unused arrays, or raise "
    "JAXMLX_MEMORY_LIMIT (docs/memory.md).";
}  // namespace

Status larger_than_limit(std::string_view what, size_t requested) {
  return resource_exhausted(std::string(what) + ": out of device memory: requested " +
                            format_bytes(requested) + ", more than the limit " +
                            format_bytes(memory_limit()) + kAdvice);
}

Status memory_exhausted(std::string_view what, size_t requested, std::string_view cause) {
  std::string msg(what);
  msg += ": out of device memory";
  if (!cause.empty()) msg += " (" + std::string(cause) + ")";
  msg += ": requested ";
  msg += requested == 0 ? std::string("unknown") : format_bytes(requested);
  msg += ", live arrays " + format_bytes(live_bytes());
  msg += ", cache " + format_bytes(mx::get_cache_memory());
  size_t limit = memory_limit();
  msg += ", limit " + (limit == 0 ? std::string("none") : format_bytes(limit));
  msg += kAdvice;
  return resource_exhausted(std::move(msg));
}

Status check_memory(size_t requested, std::string_view what) {
  size_t limit = memory_limit();
  if (limit == 0) return Status();
  auto fits = [&] {
    size_t active = live_bytes();
    return requested <= limit && active <= limit - requested;
  };
  if (fits()) return Status();
  if (requested <= limit) {
    // Buffers freed by finished work may still be held by MLX's streams or cache.
    mx::synchronize();
    mx::clear_cache();
    if (fits()) return Status();
  }
  return memory_exhausted(what, requested);
}

bool is_allocation_failure(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  if (dynamic_cast<const std::runtime_error*>(&e) == nullptr) return false;
  std::string msg = e.what();
  std::transform(msg.begin(), msg.end(), msg.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* word : {"allocat", "out of memory", "memory limit", "[malloc]"})
    if (msg.find(word) != std::string::npos) return true;
  return false;
}

}  // namespace jaxmlx::runtime
