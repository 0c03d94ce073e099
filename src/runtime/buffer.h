// Buffer: one device array (an mlx::core::array) plus the events that say when it exists.
//
// The logical element type is opaque here (an int the pjrt layer defines); `Storage` says how
// it is held in MLX. Types MLX lacks are kept bit-exactly in same-size integer storage (float8,
// float64 as raw bits; int4 as int8; complex128 as pairs of uint64), so host bytes and stored
// bytes are identical and transfers are plain copies.
//
// Thread-safe. Shared by the PJRT handle and by in-flight work (transfers, executions), so the
// array lives until the last user is done. The array is only created, read and released on the
// device worker.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "mlx/array.h"
#include "runtime/device_worker.h"
#include "runtime/event.h"

namespace jaxmlx::runtime {

struct Storage {
  mlx::core::Dtype dtype = mlx::core::uint8;  // MLX dtype of the stored array
  int element_bytes = 1;                      // bytes per logical element, host and stored
  int trailing = 0;  // extra trailing dimension of the stored array (2 for complex128), or 0
};

// A host array description: data plus optional byte strides (row-major when empty).
struct HostView {
  const void* data = nullptr;
  std::vector<int64_t> byte_strides;
};

class Buffer : public std::enable_shared_from_this<Buffer> {
 public:
  // Copies host data into a new buffer. With `copy_now`, the host memory is read before
  // returning; otherwise it is read on the worker and `host_done` fires once it is no longer
  // needed. Errors (bad strides) are returned before anything is queued.
  static StatusOr<std::shared_ptr<Buffer>> from_host(DeviceWorker& worker, int type,
                                                     std::vector<int64_t> dims, Storage storage,
                                                     const HostView& host, bool copy_now,
                                                     Event host_done);

  // A buffer whose array will be produced later by device work (set_array / set_error).
  static std::shared_ptr<Buffer> pending(DeviceWorker& worker, int type,
                                         std::vector<int64_t> dims, Storage storage);

  int type() const { return type_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  const Storage& storage() const { return storage_; }
  int64_t num_elements() const;
  size_t size_bytes() const { return static_cast<size_t>(num_elements()) * storage_.element_bytes; }

  const Event& ready() const { return ready_; }
  bool is_deleted() const { return deleted_.load(); }

  // Copies the contents to `dst` (row-major, or `byte_strides` when given) once ready. The
  // returned event fires when dst holds the data or the copy failed.
  StatusOr<Event> to_host(void* dst, size_t dst_size, std::vector<int64_t> byte_strides);

  // Releases the device memory; later reads fail with a clear error. Idempotent.
  void mark_deleted();

  // Worker-side access for device work queued before a deletion. Errors if failed or freed.
  StatusOr<mlx::core::array> array_on_worker() const;
  // array_on_worker for a buffer this run consumes (donation): the buffer lets go of its array
  // (unless a host read still copies it), so the run's graph may hold the only reference.
  StatusOr<mlx::core::array> take_array_on_worker();
  void set_array(mlx::core::array a);
  // Stores the array of an asynchronous run without signalling readiness: work queued on the
  // worker after this sees the array (MLX orders its computation); `ready()` is set by whoever
  // knows the data is complete (the run's completion task on MLX's stream).
  void store_array(mlx::core::array a);
  void set_error(Status status);

  DeviceWorker& worker() const { return worker_; }

  // For unsafe_device_pointer (buffer_pointer.h): claims the right to give the buffer its own
  // copy of the elements; true only for the first caller.
  bool claim_exposed_copy() { return !exposed_copy_.exchange(true); }

 private:
  Buffer(DeviceWorker& worker, int type, std::vector<int64_t> dims, Storage storage);
  // to_host's two ways, once the buffer is ready: a dense array copied by the calling thread
  // (false if it is not dense), or any array made contiguous on the worker.
  bool copy_if_dense(void* dst, size_t bytes, const std::vector<int64_t>& strides) const;
  void copy_on_worker(void* dst, size_t bytes, std::vector<int64_t> byte_strides, Event done);
  void end_host_read();
  void settle(const mlx::core::array& a) const;  // marks a completed run's array available
  void release_array();  // on the worker: drops the array, or defers that to the last host read

  DeviceWorker& worker_;
  const int type_;
  const std::vector<int64_t> dims_;
  const Storage storage_;
  Event ready_;
  std::atomic<bool> deleted_{false};
  std::atomic<bool> exposed_copy_{false};
  mutable std::mutex mu_;
  // guarded by mu_; created, copied and released on the worker only (host reads copy its bytes)
  std::optional<mlx::core::array> array_;
  int host_reads_ = 0;             // guarded by mu_: to_host copies not done yet
  bool release_deferred_ = false;  // guarded by mu_: deleted while host reads were pending
};

// Copies a strided host array into a dense row-major destination (or the reverse with
// `to_strided`). Strides are in bytes and may be negative or zero.
void copy_strided(const uint8_t* src, uint8_t* dst, std::span<const int64_t> dims,
                  std::span<const int64_t> strides, size_t element_bytes, bool to_strided);

// Checks that byte_strides fit dims; an empty vector means row-major.
Status check_strides(std::span<const int64_t> dims, std::span<const int64_t> strides,
                     size_t element_bytes);

}  // namespace jaxmlx::runtime
