// MLX settings that protect Metal, applied before MLX starts (macOS-specific in effect; on Linux
// MLX never reads them, so setting them there is harmless and keeps one code path).
//
// MLX cuts a Metal command buffer every MLX_MAX_OPS_PER_BUFFER ops / MLX_MAX_MB_PER_BUFFER "MB"
// (the latter actually counts elements). At MLX's defaults (40/40; 50/50 on Max/Ultra chips)
// the backends before us saw compiled replays and even plain evaluations return silently wrong,
// differing values where a graph was split (../shared/PITFALLS.md, "command-buffer split
// corruption"); an unbounded budget instead held ~90 GB wired and panicked the kernel. We use
// 800 ops / 512, the values the canaries in tests/test_command_buffer.py pin. Both are latched
// when MLX initializes its device, so this runs before the first MLX call; a value the user set
// is kept.
#pragma once

namespace jaxmlx::runtime {

inline constexpr const char* kMetalMaxOpsPerBuffer = "800";
inline constexpr const char* kMetalMaxMbPerBuffer = "512";

// Sets MLX_MAX_OPS_PER_BUFFER and MLX_MAX_MB_PER_BUFFER unless already set. Idempotent.
void apply_metal_settings();

}  // namespace jaxmlx::runtime
