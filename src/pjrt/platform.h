// Names and versions the plugin reports. Platform-specific choices live here and nowhere else.
#pragma once

#include <cstdint>
#include <string_view>

#include "vhlo/version.h"

namespace jaxmlx::pjrt {

// jax's platform name: `metal` on macOS (the Metal GPU), `mlx` elsewhere (MLX's CPU or CUDA).
#if defined(__APPLE__)
inline constexpr std::string_view kPlatformName = "metal";
#else
inline constexpr std::string_view kPlatformName = "mlx";
#endif

inline constexpr const char* kPluginVersion = "0.1.0";

// The StableHLO versions our artifact reader accepts; jaxlib serializes for min(ours, its own).
inline constexpr const auto& kStableHloCurrent = vhlo::kMaxStableHloVersion;
inline constexpr const auto& kStableHloMinimum = vhlo::kMinStableHloVersion;

}  // namespace jaxmlx::pjrt
