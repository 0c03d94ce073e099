// Declarations of the plugin's PJRT entry points and the slot index, generated from slots.def.
//
// Every PJRT_IMPL(Name) line declares `jaxmlx::pjrt::Name` with the ABI's own function type
// PJRT_Name, i.e. `PJRT_Error* Name(PJRT_Name_Args* args)` (void for Error_Destroy/Message).
// Define it in any src/pjrt/*.cc with exactly that signature (no noexcept: the type comes from
// the ABI typedef); wrap the body in guarded() from errors.h so no exception escapes.
#pragma once

#include <cstddef>
#include <string_view>

#include "pjrt/abi.h"

namespace jaxmlx::pjrt {

#define PJRT_IMPL(name) ::PJRT_##name name;
#define PJRT_UNIMPL(name)
#include "pjrt/slots.def"

// Slot numbers in table order: kSlot_Client_Create == 10, ..., kSlotCount == 138.
enum Slot : int {
#define PJRT_IMPL(name) kSlot_##name,
#define PJRT_UNIMPL(name) kSlot_##name,
#include "pjrt/slots.def"
  kSlotCount
};

// "PJRT_Client_Create" for kSlot_Client_Create; "" when out of range.
std::string_view slot_name(int slot);
// True if the slot is PJRT_IMPL in slots.def (false: the UNIMPLEMENTED stub).
bool slot_implemented(int slot);

// The table returned by GetPjrtApi (built once, static storage).
const PJRT_Api* api();

}  // namespace jaxmlx::pjrt
