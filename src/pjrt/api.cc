// The PJRT_Api table and GetPjrtApi, built in one place from slots.def.
//
// Implemented slots point at jaxmlx::pjrt::Name; the others at a generated stub that returns
// UNIMPLEMENTED naming the slot. No slot is ever null (jaxlib calls some unconditionally).

#include <array>
#include <string_view>

#include "base/crash_trace.h"
#include "pjrt/abi.h"
#include "pjrt/entry_points.h"
#include "pjrt/errors.h"

namespace jaxmlx::pjrt {
namespace {

// ------------------------------------------------------------------ stubs for PJRT_UNIMPL
#define PJRT_IMPL(name)
#define PJRT_UNIMPL(name)                                                         \
  PJRT_Error* unimplemented_##name(PJRT_##name##_Args*) {                         \
    return make_error(Code::kUnimplemented,                                       \
                      "PJRT_" #name " is not implemented by the jax-mlx plugin"); \
  }
#include "pjrt/slots.def"

// ------------------------------------------------------------------ slot metadata
constexpr std::array<std::string_view, kSlotCount> kSlotNames = {
#define PJRT_IMPL(name) "PJRT_" #name,
#define PJRT_UNIMPL(name) "PJRT_" #name,
#include "pjrt/slots.def"
};

constexpr std::array<bool, kSlotCount> kSlotImplemented = {
#define PJRT_IMPL(name) true,
#define PJRT_UNIMPL(name) false,
#include "pjrt/slots.def"
};

// ------------------------------------------------------------------ the table
// Designated initializers must follow member order, so a slots.def line out of ABI order, a
// missing line or a wrong function type is a compile error here.
constexpr PJRT_Api kApi = {
    .struct_size = PJRT_Api_STRUCT_SIZE,
    .extension_start = nullptr,
    .pjrt_api_version =
        {
            .struct_size = PJRT_Api_Version_STRUCT_SIZE,
            .extension_start = nullptr,
            .major_version = PJRT_API_MAJOR,
            .minor_version = PJRT_API_MINOR,
        },
#define PJRT_IMPL(name) .PJRT_##name = &::jaxmlx::pjrt::name,
#define PJRT_UNIMPL(name) .PJRT_##name = &unimplemented_##name,
#include "pjrt/slots.def"
};

static_assert(kSlotCount == 138, "slots.def must list the 138 slots of PJRT 0.110");
static_assert(sizeof(PJRT_Api) == 1144);
static_assert(sizeof(PJRT_Api) == offsetof(PJRT_Api, PJRT_Error_Destroy) + 8 * kSlotCount);
static_assert(offsetof(PJRT_Api, PJRT_TopologyDescription_GetMemorySpaceKindIds) ==
              40 + 8 * kSlot_TopologyDescription_GetMemorySpaceKindIds);
static_assert(PJRT_API_MAJOR == 0 && PJRT_API_MINOR == 110);

}  // namespace

std::string_view slot_name(int slot) {
  return slot >= 0 && slot < kSlotCount ? kSlotNames[slot] : std::string_view();
}

bool slot_implemented(int slot) { return slot >= 0 && slot < kSlotCount && kSlotImplemented[slot]; }

const PJRT_Api* api() { return &kApi; }

// One-time setup hook; nothing to do yet (MLX initialises lazily on first client).
PJRT_Error* Plugin_Initialize(PJRT_Plugin_Initialize_Args* args) { return nullptr; }

}  // namespace jaxmlx::pjrt

// The plugin's only exported symbol (see exports.map).
extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  jaxmlx::crash_trace::install_if_requested();  // JAXMLX_CRASH_TRACE=1 (base/crash_trace.h)
  return jaxmlx::pjrt::api();
}
