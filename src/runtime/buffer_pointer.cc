#include "runtime/buffer_pointer.h"

#include <cstring>

#include "mlx/mlx.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {

StatusOr<uintptr_t> unsafe_device_pointer(Buffer& buffer) {
  RETURN_IF_ERROR(buffer.ready().await());
  uintptr_t address = 0;
  RETURN_IF_ERROR(buffer.worker().run_sync([&]() -> Status {
    return guard("unsafe_buffer_pointer", [&]() -> Status {
      ASSIGN_OR_RETURN(mx::array a, buffer.array_on_worker());
      if (a.size() == 0) return Status();  // no elements, no address (XLA's CPU gives null too)
      if (buffer.claim_exposed_copy()) {
        // An MLX array shares its memory with the arrays it was reshaped or sliced from, and a
        // program output may be its input or a constant: a caller writing through the address
        // (DLPack) must not change those. So the buffer gets its own dense copy, once.
        mx::eval(a);
        a.wait();
        mx::array dense = a.flags().row_contiguous ? a : mx::contiguous(a);
        mx::eval(dense);
        dense.wait();
        mx::array bytes = mx::zeros({static_cast<int32_t>(dense.nbytes())}, mx::uint8);
        mx::eval(bytes);
        std::memcpy(bytes.data<uint8_t>(), dense.data<uint8_t>(), dense.nbytes());
        a = mx::reshape(mx::view(bytes, a.dtype()), a.shape());
        mx::eval(a);
        buffer.set_array(a);
      }
      mx::eval(a);
      a.wait();
      address = reinterpret_cast<uintptr_t>(a.data<uint8_t>());
      return Status();
    });
  }));
  return address;
}

}  // namespace jaxmlx::runtime
