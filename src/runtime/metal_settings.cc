#include "runtime/metal_settings.h"

#include <cstdlib>

namespace jaxmlx::runtime {

void apply_metal_settings() {
#if defined(__APPLE__)
  setenv("MLX_MAX_OPS_PER_BUFFER", kMetalMaxOpsPerBuffer, /*overwrite=*/0);
  setenv("MLX_MAX_MB_PER_BUFFER", kMetalMaxMbPerBuffer, /*overwrite=*/0);
#endif
}

}  // namespace jaxmlx::runtime
