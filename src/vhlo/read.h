// Public entry point: a StableHLO portable artifact (MLIR bytecode of the VHLO dialect, any
// version from 0.9.0 to kMaxStableHloVersion) -> ir::Module.
//
// Lifetime: the returned Module holds `bytes` (shared ownership) and its dense constants are
// views into it (or into Module-owned copies), so the caller may drop its own reference.
// Thread-safety: reentrant; concurrent calls on different inputs are fine.
// Errors: INVALID_ARGUMENT for malformed input or a too-new artifact
//   ("portable artifact targets StableHLO 2.0.0; this plugin reads up to 1.20.0"),
// UNIMPLEMENTED for a VHLO op this reader does not know. Never crashes on hostile input.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::vhlo {

StatusOr<ir::Module> read_portable_artifact(std::shared_ptr<const std::vector<uint8_t>> bytes);

// Same, for bytes the caller keeps alive itself (`keep_alive` may be null if `data` outlives the
// Module). Note: dense constant data is stored unaligned in VHLO; read it with memcpy.
StatusOr<ir::Module> read_portable_artifact(std::span<const uint8_t> data,
                                            std::shared_ptr<const void> keep_alive);

}  // namespace jaxmlx::vhlo
