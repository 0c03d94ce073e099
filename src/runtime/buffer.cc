#include "runtime/buffer.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "base/fault_injection.h"
#include "mlx/mlx.h"
#include "runtime/memory_governor.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

constexpr size_t kStagingAlignment = 64;
// Transfers up to this size may be made on the calling thread when the worker is idle; larger
// ones leave the copy to the worker, so that the caller goes on meanwhile.
constexpr size_t kCallerTransferBytes = size_t{1} << 20;

// A heap block MLX can adopt without copying; freed by the array's deleter.
uint8_t* alloc_staging(size_t bytes) {
  size_t rounded = (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
  if (rounded == 0) rounded = kStagingAlignment;
  return static_cast<uint8_t*>(std::aligned_alloc(kStagingAlignment, rounded));
}

bool is_row_major(std::span<const int64_t> dims, std::span<const int64_t> strides,
                  size_t element_bytes) {
  if (strides.empty()) return true;
  int64_t expected = static_cast<int64_t>(element_bytes);
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] != 1 && strides[i] != expected) return false;
    expected *= dims[i];
  }
  return true;
}

StatusOr<mx::Shape> storage_shape(const std::vector<int64_t>& dims, const Storage& storage) {
  mx::Shape shape;
  int64_t bytes = storage.element_bytes;
  for (int64_t d : dims) {
    if (d < 0 || d > std::numeric_limits<int32_t>::max()) {
      return invalid_argument("dimension " + std::to_string(d) +
                              " is outside what MLX supports (0 to 2^31-1)");
    }
    // Sizes are int64 byte counts everywhere: a product past that would wrap to a small size.
    if (__builtin_mul_overflow(bytes, d, &bytes))
      return invalid_argument("an array of " + std::to_string(dims.size()) +
                              " dimensions this large is too large (over 2^63 bytes)");
    shape.push_back(static_cast<int32_t>(d));
  }
  if (storage.trailing) shape.push_back(storage.trailing);
  return shape;
}

}  // namespace

Status check_strides(std::span<const int64_t> dims, std::span<const int64_t> strides,
                     size_t element_bytes) {
  if (strides.empty()) return Status();
  if (strides.size() != dims.size()) {
    return invalid_argument("byte_strides has " + std::to_string(strides.size()) +
                            " entries for an array of rank " + std::to_string(dims.size()));
  }
  return Status();
}

void copy_strided(const uint8_t* src, uint8_t* dst, std::span<const int64_t> dims,
                  std::span<const int64_t> strides, size_t element_bytes, bool to_strided) {
  size_t rank = dims.size();
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (count == 0) return;
  if (is_row_major(dims, strides, element_bytes)) {
    std::memcpy(dst, src, static_cast<size_t>(count) * element_bytes);
    return;
  }
  // Walk the strided side with an index odometer; the dense side advances linearly.
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;  // byte offset on the strided side
  uint8_t* dense = to_strided ? const_cast<uint8_t*>(src) : dst;
  for (int64_t n = 0; n < count; ++n) {
    uint8_t* d = dense + static_cast<size_t>(n) * element_bytes;
    if (to_strided) {
      std::memcpy(dst + offset, d, element_bytes);
    } else {
      std::memcpy(d, src + offset, element_bytes);
    }
    for (size_t i = rank; i-- > 0;) {
      offset += strides[i];
      if (++index[i] < dims[i]) break;
      offset -= strides[i] * dims[i];
      index[i] = 0;
    }
  }
}

Buffer::Buffer(DeviceWorker& worker, int type, std::vector<int64_t> dims, Storage storage)
    : worker_(worker), type_(type), dims_(std::move(dims)), storage_(storage) {}

int64_t Buffer::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

std::shared_ptr<Buffer> Buffer::pending(DeviceWorker& worker, int type, std::vector<int64_t> dims,
                                        Storage storage) {
  return std::shared_ptr<Buffer>(new Buffer(worker, type, std::move(dims), storage));
}

StatusOr<std::shared_ptr<Buffer>> Buffer::from_host(DeviceWorker& worker, int type,
                                                    std::vector<int64_t> dims, Storage storage,
                                                    const HostView& host, bool copy_now,
                                                    Event host_done) {
  RETURN_IF_ERROR(check_strides(dims, host.byte_strides, storage.element_bytes));
  ASSIGN_OR_RETURN(mx::Shape shape, storage_shape(dims, storage));
  auto buffer = pending(worker, type, std::move(dims), storage);
  size_t bytes = buffer->size_bytes();
  if (bytes > 0 && host.data == nullptr) return invalid_argument("host data pointer is null");
  // The memory limit: a transfer larger than the limit itself is refused by the call, before any
  // memory is staged. Whether it fits beside the live arrays is decided on the worker, in queue
  // order, before its array exists; a refusal then fails the buffer. Waiting for the worker here
  // would serialize transfers behind running programs, and deadlock when the worker runs a host
  // callback that waits for the GIL this caller holds.
  if (memory_limit() != 0 && bytes > memory_limit())
    return larger_than_limit("host-to-device transfer", bytes);
  auto fits = [bytes] { return check_memory(bytes, "host-to-device transfer"); };

  // Reads the host array into a staging block that the MLX array then adopts.
  auto stage = [buffer, bytes, host, storage]() -> StatusOr<uint8_t*> {
    std::optional<std::string> injected = fault::fired(fault::Point::kAlloc);  // JAXMLX_FAULT
    uint8_t* staging = injected ? nullptr : alloc_staging(bytes);
    if (!staging) {
      return resource_exhausted("cannot allocate " + std::to_string(bytes) +
                                " bytes of host staging memory for a transfer" +
                                (injected ? ": " + *injected : std::string()));
    }
    copy_strided(static_cast<const uint8_t*>(host.data), staging, buffer->dims(),
                 host.byte_strides, storage.element_bytes, /*to_strided=*/false);
    return staging;
  };
  auto adopt = [buffer, shape, storage, bytes, fits](uint8_t* staging) {
    Status st = guard("BufferFromHostBuffer", [&] {
      if (Status room = fits(); !room.ok()) {
        std::free(staging);
        return room;
      }
      // MLX does not count adopted memory as active: the governor does, until it is freed.
      note_adopted(bytes);
      buffer->set_array(mx::array(staging, shape, storage.dtype, [bytes](void* p) {
        note_released(bytes);
        std::free(p);
      }));
      return Status();
    });
    if (!st.ok()) buffer->set_error(st);
  };

  // A small transfer the idle worker would only hand back is made by the caller in its place
  // (DeviceWorker::run_here_if_idle): one thread hand-off less per jax.device_put.
  auto run = [&worker, bytes](std::function<void()> task) {
    if (bytes <= kCallerTransferBytes && worker.run_here_if_idle(task)) return;
    worker.post(std::move(task));
  };
  if (copy_now) {
    ASSIGN_OR_RETURN(uint8_t* staging, stage());
    host_done.set();
    run([adopt, staging] { adopt(staging); });
  } else {
    run([stage, adopt, buffer, host_done, fits] {
      // Checked before staging too, so a refused transfer never copies.
      Status room = guard("BufferFromHostBuffer", fits);
      if (!room.ok()) {
        host_done.set();
        buffer->set_error(room);
        return;
      }
      auto staging = stage();
      host_done.set();
      if (!staging.ok()) {
        buffer->set_error(staging.status());
        return;
      }
      adopt(*staging);
    });
  }
  return buffer;
}

void Buffer::set_array(mx::array a) {
  store_array(std::move(a));
  ready_.set();
}

void Buffer::store_array(mx::array a) {
  std::lock_guard<std::mutex> lock(mu_);
  // Even if deleted meanwhile: the free task was queued after this one and releases it.
  array_.emplace(std::move(a));
}

void Buffer::set_error(Status status) { ready_.set(std::move(status)); }

StatusOr<mx::array> Buffer::array_on_worker() const {
  Status st = ready_.status();
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(mu_);
  if (!array_) return failed_precondition("buffer has been deleted or donated");
  settle(*array_);
  return *array_;
}

// MLX's async_eval attaches its evaluation's event to every array it evaluates, and a later
// evaluation reading one asks that event whether it has signalled (on CUDA a cuEventQuery per
// such input per run: 20 per mlp training step on the H200). A buffer whose ready event is set
// (after the run's kernels, by its completion) knows the answer: the array is marked available
// here, as is_available() does once the device says so. Worker-side only, as every other use of
// an array's event and status.
void Buffer::settle(const mx::array& a) const {
  if (a.status() == mx::array::Status::evaluated && ready_.is_ready()) {
    a.attach_event(mx::Event{});  // detach_event() without its error check (not exported)
    a.set_status(mx::array::Status::available);
  }
}

StatusOr<mx::array> Buffer::take_array_on_worker() {
  Status st = ready_.status();
  if (!st.ok()) return st;
  std::optional<mx::array> taken;
  std::lock_guard<std::mutex> lock(mu_);
  if (!array_) return failed_precondition("buffer has been deleted or donated");
  settle(*array_);
  if (host_reads_ > 0) return *array_;  // pinned until the copy is done
  taken.swap(array_);
  return std::move(*taken);
}

void Buffer::mark_deleted() {
  if (deleted_.exchange(true)) return;
  // Freed on the worker, after the work queued before the deletion has read the array (and
  // after pending host reads, see to_host).
  worker_.post_lazy([self = shared_from_this()] { self->release_array(); });
}

StatusOr<Event> Buffer::to_host(void* dst, size_t dst_size, std::vector<int64_t> byte_strides) {
  if (is_deleted()) return failed_precondition("cannot copy a deleted or donated buffer to host");
  size_t bytes = size_bytes();
  RETURN_IF_ERROR(check_strides(dims_, byte_strides, storage_.element_bytes));
  if (byte_strides.empty() && dst_size < bytes) {
    return invalid_argument("destination holds " + std::to_string(dst_size) +
                            " bytes; the buffer needs " + std::to_string(bytes));
  }
  if (bytes > 0 && dst == nullptr) return invalid_argument("destination pointer is null");
  // Ready means the data is complete, and an array in a live buffer is never written again: a
  // dense one is copied as soon as it is ready, by whichever thread makes it ready, without a
  // round trip through the worker (which would also wait behind queued runs). Until the copy is
  // done the array is pinned: a deletion meanwhile releases it only afterwards.
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++host_reads_;
  }
  Event done;
  ready_.on_ready([self = shared_from_this(), dst, bytes, strides = std::move(byte_strides),
                   done](const Status& st) mutable {
    if (st.ok() && !self->copy_if_dense(dst, bytes, strides)) {
      self->copy_on_worker(dst, bytes, std::move(strides), done);
      return;
    }
    self->end_host_read();
    done.set(st);
  });
  return done;
}

void Buffer::end_host_read() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--host_reads_ > 0 || !release_deferred_) return;
    release_deferred_ = false;
  }
  worker_.post_lazy([self = shared_from_this()] { self->release_array(); });
}

void Buffer::release_array() {
  std::optional<mx::array> doomed;  // destroyed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  if (host_reads_ > 0) {
    release_deferred_ = true;
    return;
  }
  doomed.swap(array_);
}

bool Buffer::copy_if_dense(void* dst, size_t bytes, const std::vector<int64_t>& strides) const {
  // The lock keeps a concurrent free task from releasing the array meanwhile.
  std::lock_guard<std::mutex> lock(mu_);
  if (!array_ || !array_->flags().row_contiguous || array_->nbytes() != bytes) return false;
  if (bytes > 0) {
    copy_strided(array_->data<uint8_t>(), static_cast<uint8_t*>(dst), dims_, strides,
                 storage_.element_bytes, /*to_strided=*/true);
  }
  return true;
}

void Buffer::copy_on_worker(void* dst, size_t bytes, std::vector<int64_t> byte_strides,
                            Event done) {
  worker_.post([self = shared_from_this(), dst, bytes, strides = std::move(byte_strides), done] {
    Status st = guard("ToHostBuffer", [&]() -> Status {
      // Creation and execution tasks run before this one, so the array is final here.
      ASSIGN_OR_RETURN(mx::array a, self->array_on_worker());
      if (bytes == 0) return Status();
      a = mx::contiguous(a);
      mx::eval(a);
      copy_strided(a.data<uint8_t>(), static_cast<uint8_t*>(dst), self->dims_, strides,
                   self->storage_.element_bytes, /*to_strided=*/true);
      return Status();
    });
    self->end_host_read();
    done.set(st);
  });
}

}  // namespace jaxmlx::runtime
