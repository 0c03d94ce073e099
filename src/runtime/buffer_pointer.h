// The address of a buffer's elements, for PJRT_Buffer_UnsafePointer (jax's
// Array.unsafe_buffer_pointer(), used by zero-copy checks and interop).
//
// MLX keeps arrays in memory the host can address (unified memory on Apple silicon, host memory
// on Linux CPU, managed memory with CUDA), so the address is the array's data pointer. The
// elements are made dense and row-major first (an output may be a strided view of another
// array), exactly once: later calls return the same address, which stays valid until the buffer
// is deleted. Blocks until the buffer is ready; its error, if it failed, is returned.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "runtime/buffer.h"

namespace jaxmlx::runtime {

StatusOr<uintptr_t> unsafe_device_pointer(Buffer& buffer);

}  // namespace jaxmlx::runtime
