#include "passes/xla_cpu_version.h"

#include <charconv>
#include <cstdlib>

namespace jaxmlx::passes {

bool version_at_least(std::string_view v, int major, int minor) {
  int ma = 0, mi = 0;
  const char* end = v.data() + v.size();
  auto r = std::from_chars(v.data(), end, ma);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != '.') return false;
  r = std::from_chars(r.ptr + 1, end, mi);
  if (r.ec != std::errc()) return false;
  return ma != major ? ma > major : mi >= minor;
}

bool reference_jaxlib_at_least(int major, int minor) {
  const char* v = std::getenv("JAXMLX_XLA_CPU_VERSION");
  return v != nullptr && version_at_least(v, major, minor);
}

}  // namespace jaxmlx::passes
