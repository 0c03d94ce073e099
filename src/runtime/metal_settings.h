// MLX settings that protect Metal, applied before MLX starts. macOS builds only: MLX's CUDA
// backend reads the same two variables as the size of each CUDA graph it launches (on an H200 its
// own default is 100 nodes / 1000 MB), and a graph's temporaries are freed only when the whole
// graph has run, so 800 nodes there raised a training step's peak memory by ~40 % (bench/README.md,
// "Peak memory on CUDA"). On MLX's CPU they mean nothing.
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

// On macOS, sets MLX_MAX_OPS_PER_BUFFER and MLX_MAX_MB_PER_BUFFER unless already set; elsewhere
// does nothing. Idempotent.
void apply_metal_settings();

}  // namespace jaxmlx::runtime
