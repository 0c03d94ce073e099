// Memory governor: a process-wide limit on the device memory the plugin may use.
//
// Without it a program whose outputs do not fit (or a huge device_put) makes MLX allocate until
// the OS kills the process, or on a unified-memory machine takes the whole machine down. The
// governor refuses such work up front with RESOURCE_EXHAUSTED, naming the numbers, and turns an
// allocation failure inside MLX into the same error, so the process stays usable.
//
// Limits (docs/memory.md):
//   JAXMLX_MEMORY_LIMIT  bytes ("8G", "512M", "1073741824") or a fraction of the device memory
//                        ("0.5"); default kDefaultLimitFraction of the memory MLX reports
//                        (the machine's RAM where MLX reports none, as for its CPU device).
//   JAXMLX_CACHE_LIMIT   MLX's buffer cache, same syntax, a fraction being of the memory limit;
//                        default kDefaultCacheFraction of the memory limit.
// A value that does not parse is reported on stderr once and the default is used.
//
// Thread-compatibility: configure(), check() and the MLX queries run on the device worker thread
// (the only thread that touches MLX); limit() may be read from any thread.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

#include "base/status.h"

namespace jaxmlx::runtime {

inline constexpr double kDefaultLimitFraction = 0.75;
inline constexpr double kDefaultCacheFraction = 0.5;

// Parses a limit: an integer byte count, optionally with a K/M/G/T suffix (powers of 1024,
// optional trailing "B" or "iB"), or a fraction in (0, 1] of `whole`. Whitespace around the value
// is allowed. INVALID_ARGUMENT names the text on anything else (empty, negative, zero, garbage,
// overflow, a fraction above 1).
StatusOr<size_t> parse_memory_size(std::string_view text, size_t whole);

// The limits in force.
struct MemoryLimits {
  size_t limit = 0;        // bytes the plugin's live arrays may use; 0 = no limit (unknown device)
  size_t cache_limit = 0;  // bytes MLX may keep cached
};

// Reads the environment, computes the limits for a device with `device_bytes` of memory and
// applies them to MLX (set_memory_limit, set_cache_limit). Worker thread. Returns the limits.
MemoryLimits configure_memory_governor(size_t device_bytes);

// The limits computed from `memory_env` / `cache_env` (nullptr = unset); no MLX calls, for tests.
// Unparsable values fall back to the defaults and are described in `*warning` when given.
MemoryLimits compute_memory_limits(const char* memory_env, const char* cache_env,
                                   size_t device_bytes, std::string* warning = nullptr);

// The process limit in bytes (0 when none is set).
size_t memory_limit();

// Memory MLX arrays adopt from us (transfer staging blocks) is not counted by MLX's allocator;
// the governor counts it here. Any thread.
void note_adopted(size_t bytes);
void note_released(size_t bytes);

// Bytes held by live arrays: MLX's active memory plus adopted blocks. Worker thread.
size_t live_bytes();

// Worker thread. OK if `requested` more bytes fit beside the live arrays; otherwise waits for
// in-flight MLX work, empties MLX's cache and checks again, then refuses with
// RESOURCE_EXHAUSTED naming `what` and the numbers.
Status check_memory(size_t requested, std::string_view what);

// The RESOURCE_EXHAUSTED status for `what`, with requested bytes (0 = unknown), live arrays,
// cache and the limit. Worker thread (reads MLX's counters).
Status memory_exhausted(std::string_view what, size_t requested, std::string_view cause = {});

// RESOURCE_EXHAUSTED for work that needs `requested` bytes, more than the limit itself, so it can
// never run. Any thread (reads no MLX counters).
Status larger_than_limit(std::string_view what, size_t requested);

// True for what MLX or the C++ runtime throws when an allocation fails: std::bad_alloc, or a
// runtime_error whose message speaks of allocating or memory.
bool is_allocation_failure(const std::exception& e);

// "1.50 GiB (1610612736 bytes)".
std::string format_bytes(size_t bytes);

}  // namespace jaxmlx::runtime
