// PJRT entry points of buffers: host transfers, queries, deletion and copies.
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/element_types.h"
#include "pjrt/entry_points.h"
#include "pjrt/errors.h"
#include "pjrt/objects.h"
#include "runtime/buffer_pointer.h"

namespace jaxmlx::pjrt {
namespace {

StatusOr<PJRT_Buffer*> checked_buffer(PJRT_Buffer* buffer) {
  if (buffer == nullptr) return invalid_argument("buffer is null");
  return buffer;
}

// The row-major byte strides of a host layout, or an error for layouts we cannot honour.
// Null layout: row-major (returned as an empty vector).
StatusOr<std::vector<int64_t>> host_strides(const PJRT_Buffer_MemoryLayout* layout,
                                            const std::vector<int64_t>& dims,
                                            size_t element_bytes) {
  if (layout == nullptr) return std::vector<int64_t>{};
  if (layout->type == PJRT_Buffer_MemoryLayout_Type_Strides) {
    const auto& s = layout->strides;
    if (s.num_byte_strides > 0 && s.byte_strides == nullptr)
      return invalid_argument("host layout: byte_strides is null");
    if (s.num_byte_strides != dims.size()) {
      return invalid_argument("host layout has " + std::to_string(s.num_byte_strides) +
                              " strides for rank " + std::to_string(dims.size()));
    }
    return std::vector<int64_t>(s.byte_strides, s.byte_strides + s.num_byte_strides);
  }
  if (layout->type != PJRT_Buffer_MemoryLayout_Type_Tiled) {
    return invalid_argument("unknown memory layout type " + std::to_string(layout->type));
  }
  const auto& t = layout->tiled;
  if (t.num_tiles != 0) return unimplemented("tiled host layouts are not supported");
  if (t.minor_to_major_size > 0 && t.minor_to_major == nullptr)
    return invalid_argument("host layout: minor_to_major is null");
  if (t.minor_to_major_size != dims.size()) {
    return invalid_argument("minor_to_major has " + std::to_string(t.minor_to_major_size) +
                            " entries for rank " + std::to_string(dims.size()));
  }
  // Any permutation: strides follow from minor_to_major.
  std::vector<int64_t> strides(dims.size(), 0);
  std::vector<bool> seen(dims.size(), false);
  int64_t stride = static_cast<int64_t>(element_bytes);
  for (size_t i = 0; i < t.minor_to_major_size; ++i) {
    int64_t d = t.minor_to_major[i];
    if (d < 0 || static_cast<size_t>(d) >= dims.size() || seen[d]) {
      return invalid_argument("minor_to_major is not a permutation of the dimensions");
    }
    seen[d] = true;
    strides[d] = stride;
    stride *= dims[d];
  }
  return strides;
}

Status check_memory_target(PJRT_Client* client, PJRT_Device* device, PJRT_Memory* memory) {
  if (memory != nullptr) {
    if (memory != client->memory.get()) {
      return invalid_argument("the destination memory does not belong to this client");
    }
    return Status();
  }
  if (device != nullptr && device != &client->device) {
    return invalid_argument("the destination device does not belong to this client");
  }
  return Status();
}

// Checks that every element written through byte `strides` lands inside [dst, dst + dst_size):
// a layout reaching outside would make the copy write over the caller's other memory.
Status check_strided_extent(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                            size_t element_bytes, size_t dst_size) {
  if (strides.empty()) return Status();
  int64_t lo = 0, hi = static_cast<int64_t>(element_bytes);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) return Status();  // nothing is written
    int64_t span = 0;
    bool overflow = __builtin_mul_overflow(dims[i] - 1, strides[i], &span) ||
                    __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi);
    if (overflow) return invalid_argument("ToHostBuffer: the host layout's byte strides overflow");
  }
  if (lo < 0 || static_cast<uint64_t>(hi) > dst_size) {
    return invalid_argument("ToHostBuffer: the host layout's byte strides reach bytes [" +
                            std::to_string(lo) + ", " + std::to_string(hi) +
                            ") of a destination of " + std::to_string(dst_size) + " bytes");
  }
  return Status();
}

// The buffer's client, unless it has been destroyed.
StatusOr<PJRT_Client*> client_of(const PJRT_Buffer* b, std::string_view what) {
  RETURN_IF_ERROR(check_client_alive(b->client_alive, what));
  return b->client;
}

}  // namespace

PJRT_Buffer* new_buffer(PJRT_Client* client, std::shared_ptr<runtime::Buffer> buffer) {
  auto* out = new PJRT_Buffer;
  out->client = client;
  out->client_alive = client->alive;
  out->worker = client->worker;
  out->buffer = std::move(buffer);
  return out;
}

Status check_client_alive(const std::shared_ptr<const std::atomic<bool>>& alive,
                          std::string_view what) {
  if (alive && alive->load()) return Status();
  return failed_precondition(std::string(what) + ": the client it belongs to has been destroyed");
}

PJRT_Error* Client_BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args) {
  return guarded(args, [&]() -> Status {
    PJRT_Client* client = args->client;
    if (client == nullptr) return invalid_argument("BufferFromHostBuffer: client is null");
    RETURN_IF_ERROR(check_memory_target(client, args->device, args->memory));
    auto storage = storage_for(args->type);
    if (!storage) {
      return invalid_argument("BufferFromHostBuffer: element type " +
                              element_type_name(args->type) +
                              " cannot be placed on the mlx device");
    }
    if (args->num_dims > 0 && args->dims == nullptr) {
      return invalid_argument("BufferFromHostBuffer: dims is null for rank " +
                              std::to_string(args->num_dims));
    }
    std::vector<int64_t> dims(args->dims, args->dims + args->num_dims);
    for (int64_t d : dims) {
      if (d < 0) return invalid_argument("BufferFromHostBuffer: negative dimension " + std::to_string(d));
    }
    if (args->device_layout != nullptr) {
      ASSIGN_OR_RETURN(auto strides, host_strides(args->device_layout, dims, storage->element_bytes));
      // Device arrays are always dense row-major; other device layouts are not ours to give.
      int64_t expect = storage->element_bytes;
      for (size_t i = dims.size(); i-- > 0;) {
        if (!strides.empty() && dims[i] > 1 && strides[i] != expect) {
          return unimplemented("BufferFromHostBuffer: only dense row-major device layouts");
        }
        expect *= dims[i];
      }
    }
    runtime::HostView host{args->data, {}};
    if (args->byte_strides != nullptr && args->num_byte_strides > 0) {
      host.byte_strides.assign(args->byte_strides, args->byte_strides + args->num_byte_strides);
    }
    bool copy_now = args->host_buffer_semantics == PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
    runtime::Event host_done;
    ASSIGN_OR_RETURN(auto buffer,
                     runtime::Buffer::from_host(*client->worker, args->type, std::move(dims),
                                                *storage, host, copy_now, host_done));
    args->done_with_host_buffer = new_event(host_done);
    args->buffer = new_buffer(client, std::move(buffer));
    return Status();
  });
}

PJRT_Error* Buffer_Destroy(PJRT_Buffer_Destroy_Args* args) {
  return guarded(args, [&] {
    if (args->buffer == nullptr) return;
    args->buffer->buffer->mark_deleted();
    delete args->buffer;
  });
}

PJRT_Error* Buffer_ElementType(PJRT_Buffer_ElementType_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    args->type = static_cast<PJRT_Buffer_Type>(b->buffer->type());
    return Status();
  });
}

PJRT_Error* Buffer_Dimensions(PJRT_Buffer_Dimensions_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    args->dims = b->buffer->dims().data();
    args->num_dims = b->buffer->dims().size();
    return Status();
  });
}

PJRT_Error* Buffer_UnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    args->unpadded_dims = b->buffer->dims().data();
    args->num_dims = b->buffer->dims().size();
    return Status();
  });
}

PJRT_Error* Buffer_DynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  return guarded(args, [&]() -> Status {
    RETURN_IF_ERROR(checked_buffer(args->buffer).status());
    args->dynamic_dim_indices = nullptr;
    args->num_dynamic_dims = 0;
    return Status();
  });
}

PJRT_Error* Buffer_GetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    std::lock_guard<std::mutex> lock(b->mu);
    size_t rank = b->buffer->dims().size();
    if (b->minor_to_major.size() != rank) {
      b->minor_to_major.clear();
      for (size_t i = rank; i-- > 0;) b->minor_to_major.push_back(static_cast<int64_t>(i));
    }
    PJRT_Buffer_MemoryLayout& l = args->layout;
    l.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    l.extension_start = nullptr;
    l.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    l.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    l.tiled.extension_start = nullptr;
    l.tiled.minor_to_major = b->minor_to_major.data();
    l.tiled.minor_to_major_size = rank;
    l.tiled.tile_dims = nullptr;
    l.tiled.tile_dim_sizes = nullptr;
    l.tiled.num_tiles = 0;
    return Status();
  });
}

PJRT_Error* Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->src));
    const runtime::Buffer& buf = *b->buffer;
    ASSIGN_OR_RETURN(auto strides, host_strides(args->host_layout, buf.dims(),
                                                buf.storage().element_bytes));
    if (args->dst == nullptr) {
      args->dst_size = buf.size_bytes();  // a size query
      args->event = nullptr;
      return Status();
    }
    RETURN_IF_ERROR(check_strided_extent(buf.dims(), strides, buf.storage().element_bytes,
                                         args->dst_size));
    ASSIGN_OR_RETURN(runtime::Event done, b->buffer->to_host(args->dst, args->dst_size, strides));
    args->event = new_event(done);
    return Status();
  });
}

PJRT_Error* Buffer_OnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    args->on_device_size_in_bytes = b->buffer->size_bytes();
    return Status();
  });
}

PJRT_Error* Buffer_UnsafePointer(PJRT_Buffer_UnsafePointer_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    if (b->buffer->is_deleted())
      return failed_precondition("PJRT_Buffer_UnsafePointer: the buffer has been deleted or donated");
    ASSIGN_OR_RETURN(args->buffer_pointer, runtime::unsafe_device_pointer(*b->buffer));
    return Status();
  });
}

PJRT_Error* Buffer_Delete(PJRT_Buffer_Delete_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    b->buffer->mark_deleted();
    return Status();
  });
}

PJRT_Error* Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    args->is_deleted = b->buffer->is_deleted();
    return Status();
  });
}

// Arrays are immutable, so a copy on the same device shares the MLX array.
static Status copy_buffer(PJRT_Buffer* src, PJRT_Buffer** out) {
  if (src->buffer->is_deleted()) return failed_precondition("cannot copy a deleted or donated buffer");
  auto from = src->buffer;
  auto to = runtime::Buffer::pending(from->worker(), from->type(), from->dims(), from->storage());
  from->worker().post([from, to] {
    auto a = from->array_on_worker();
    if (a.ok()) {
      to->set_array(*a);
    } else {
      to->set_error(a.status());
    }
  });
  *out = new_buffer(src->client, to);
  return Status();
}

PJRT_Error* Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    ASSIGN_OR_RETURN(PJRT_Client * client, client_of(b, "CopyToDevice"));
    if (args->dst_device != &client->device) {
      return invalid_argument("CopyToDevice: the destination device does not belong to this client");
    }
    return copy_buffer(b, &args->dst_buffer);
  });
}

PJRT_Error* Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    ASSIGN_OR_RETURN(PJRT_Client * client, client_of(b, "CopyToMemory"));
    if (args->dst_memory != client->memory.get()) {
      return invalid_argument("CopyToMemory: the destination memory does not belong to this client");
    }
    return copy_buffer(b, &args->dst_buffer);
  });
}

PJRT_Error* Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args* args) {
  // Host reads always go through ToHostBuffer, even when MLX runs on the CPU.
  return guarded(args, [&] { args->is_on_cpu = false; });
}

PJRT_Error* Buffer_Device(PJRT_Buffer_Device_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    ASSIGN_OR_RETURN(PJRT_Client * client, client_of(b, "PJRT_Buffer_Device"));
    args->device = &client->device;
    return Status();
  });
}

PJRT_Error* Buffer_Memory(PJRT_Buffer_Memory_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    ASSIGN_OR_RETURN(PJRT_Client * client, client_of(b, "PJRT_Buffer_Memory"));
    args->memory = client->memory.get();
    return Status();
  });
}

PJRT_Error* Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    if (b->buffer->is_deleted()) {
      args->event = new_event(runtime::Event::ready(
          failed_precondition("the buffer has been deleted or donated")));
    } else if (b->worker->on_worker_thread() && !b->buffer->ready().is_ready() &&
               !b->buffer->array_on_worker().ok()) {
      // Asked on the device worker, i.e. by a host callback, for an array whose producing work
      // is queued behind the callback: waiting would hang forever, so the wait fails now.
      args->event = new_event(runtime::Event::ready(failed_precondition(
          "a host callback waited for an array that device work queued after its own run has "
          "yet to compute; the device worker runs the callback, so that work cannot start "
          "until the callback returns (pass the array to the callback as an argument instead)")));
    } else {
      args->event = new_event(b->buffer->ready());
    }
    return Status();
  });
}

PJRT_Error* Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    std::lock_guard<std::mutex> lock(b->mu);
    ++b->external_references;
    return Status();
  });
}

PJRT_Error* Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_Buffer * b, checked_buffer(args->buffer));
    std::lock_guard<std::mutex> lock(b->mu);
    if (b->external_references == 0) {
      return failed_precondition("DecreaseExternalReferenceCount without a matching increase");
    }
    --b->external_references;
    return Status();
  });
}

}  // namespace jaxmlx::pjrt
