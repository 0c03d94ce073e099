// PJRT entry points of the client, its device, memory and topology, and plugin attributes.
#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>

#include "base/fault_injection.h"
#include "mlx/mlx.h"
#include "pjrt/entry_points.h"
#include "pjrt/errors.h"
#include "pjrt/objects.h"
#include "pjrt/platform.h"
#include "runtime/memory_governor.h"

namespace mx = mlx::core;

namespace jaxmlx::pjrt {
namespace {

PJRT_NamedValue int64_list(const char* name, const int64_t* values, size_t n) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = PJRT_NamedValue_kInt64List;
  v.int64_array_value = values;
  v.value_size = n;
  return v;
}

void set_string(const std::string& s, const char** out, size_t* out_size) {
  *out = s.c_str();
  *out_size = s.size();
}

// Builds the client's object graph around a started device worker.
void build_client(PJRT_Client* c) {
  const runtime::DeviceInfo& info = c->worker->info();
  c->platform_name = std::string(kPlatformName);
  c->platform_version = std::string("jax-mlx ") + kPluginVersion + "; MLX " + mx::version() +
                        "; " + (info.is_gpu ? "gpu" : "cpu");

  PJRT_DeviceDescription& d = c->description;
  d.id = 0;
  d.process_index = 0;
  d.kind = info.kind;
  d.debug_string = c->platform_name + ":0";
  d.to_string = "MlxDevice(id=0, kind='" + info.kind + "')";

  auto memory = std::make_unique<Memory>();
  memory->client = c;
  memory->id = 0;
  memory->debug_string = c->platform_name + ":0 device memory";
  memory->to_string = "MEMORY_SPACE(id=0, kind=device, device=" + d.to_string + ")";
  memory->devices = {&c->device};

  c->device.client = c;
  c->device.description = &c->description;
  c->device.memories = {memory.get()};
  c->device.default_memory = memory.get();
  c->memories = {memory.get()};
  c->memory = std::move(memory);
  c->devices = {&c->device};
  c->topology.client = c;
  c->topology.descriptions = {&c->description};
}

}  // namespace

// ------------------------------------------------------------------------ plugin

PJRT_Error* Plugin_Attributes(PJRT_Plugin_Attributes_Args* args) {
  return guarded(args, [&]() -> Status {
    static const int64_t current[3] = {kStableHloCurrent[0], kStableHloCurrent[1],
                                       kStableHloCurrent[2]};
    static const int64_t minimum[3] = {kStableHloMinimum[0], kStableHloMinimum[1],
                                       kStableHloMinimum[2]};
    static const PJRT_NamedValue attributes[] = {
        int64_list("stablehlo_current_version", current, 3),
        int64_list("stablehlo_minimum_version", minimum, 3),
    };
    args->attributes = attributes;
    args->num_attributes = std::size(attributes);
    return Status();
  });
}

// ------------------------------------------------------------------------ client

PJRT_Error* Client_Create(PJRT_Client_Create_Args* args) {
  return guarded(args, [&]() -> Status {
    // A JAXMLX_FAULT that does not parse must not be ignored: tests relying on it would pass.
    RETURN_IF_ERROR(fault::install_from_env());
    auto client = std::make_unique<PJRT_Client>();
    client->worker = runtime::DeviceWorker::shared();
    build_client(client.get());
    args->client = client.release();
    return Status();
  });
}

PJRT_Error* Client_Destroy(PJRT_Client_Destroy_Args* args) {
  return guarded(args, [&] { delete args->client; });
}

PJRT_Error* Client_PlatformName(PJRT_Client_PlatformName_Args* args) {
  return guarded(args, [&]() -> PJRT_Error* {
    JAXMLX_RETURN_IF_PJRT_ERROR(check_not_null("PJRT_Client_PlatformName", args->client, "client"));
    set_string(args->client->platform_name, &args->platform_name, &args->platform_name_size);
    return nullptr;
  });
}

PJRT_Error* Client_ProcessIndex(PJRT_Client_ProcessIndex_Args* args) {
  return guarded(args, [&] { args->process_index = 0; });
}

PJRT_Error* Client_PlatformVersion(PJRT_Client_PlatformVersion_Args* args) {
  return guarded(args, [&]() -> PJRT_Error* {
    JAXMLX_RETURN_IF_PJRT_ERROR(
        check_not_null("PJRT_Client_PlatformVersion", args->client, "client"));
    set_string(args->client->platform_version, &args->platform_version,
               &args->platform_version_size);
    return nullptr;
  });
}

PJRT_Error* Client_TopologyDescription(PJRT_Client_TopologyDescription_Args* args) {
  return guarded(args, [&]() -> PJRT_Error* {
    JAXMLX_RETURN_IF_PJRT_ERROR(
        check_not_null("PJRT_Client_TopologyDescription", args->client, "client"));
    args->topology = &args->client->topology;
    return nullptr;
  });
}

PJRT_Error* Client_Devices(PJRT_Client_Devices_Args* args) {
  return guarded(args, [&]() -> PJRT_Error* {
    JAXMLX_RETURN_IF_PJRT_ERROR(check_not_null("PJRT_Client_Devices", args->client, "client"));
    args->devices = args->client->devices.data();
    args->num_devices = args->client->devices.size();
    return nullptr;
  });
}

PJRT_Error* Client_AddressableDevices(PJRT_Client_AddressableDevices_Args* args) {
  return guarded(args, [&]() -> PJRT_Error* {
    JAXMLX_RETURN_IF_PJRT_ERROR(
        check_not_null("PJRT_Client_AddressableDevices", args->client, "client"));
    args->addressable_devices = args->client->devices.data();
    args->num_addressable_devices = args->client->devices.size();
    return nullptr;
  });
}

PJRT_Error* Client_LookupDevice(PJRT_Client_LookupDevice_Args* args) {
  return guarded(args, [&]() -> Status {
    if (args->client == nullptr) return invalid_argument("PJRT_Client_LookupDevice: client is null");
    if (args->id != 0) {
      return invalid_argument("no device with id " + std::to_string(args->id) +
                              "; this client has one device, id 0");
    }
    args->device = &args->client->device;
    return Status();
  });
}

PJRT_Error* Client_LookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args* args) {
  return guarded(args, [&]() -> Status {
    if (args->client == nullptr) {
      return invalid_argument("PJRT_Client_LookupAddressableDevice: client is null");
    }
    if (args->local_hardware_id != 0) {
      return invalid_argument("no device with local hardware id " +
                              std::to_string(args->local_hardware_id));
    }
    args->addressable_device = &args->client->device;
    return Status();
  });
}

PJRT_Error* Client_AddressableMemories(PJRT_Client_AddressableMemories_Args* args) {
  return guarded(args, [&]() -> PJRT_Error* {
    JAXMLX_RETURN_IF_PJRT_ERROR(
        check_not_null("PJRT_Client_AddressableMemories", args->client, "client"));
    args->addressable_memories = args->client->memories.data();
    args->num_addressable_memories = args->client->memories.size();
    return nullptr;
  });
}

PJRT_Error* Client_DefaultDeviceAssignment(PJRT_Client_DefaultDeviceAssignment_Args* args) {
  return guarded(args, [&]() -> Status {
    int64_t n = int64_t{args->num_replicas} * args->num_partitions;
    if (n != 1) {
      return invalid_argument("the mlx platform has one device; cannot assign " +
                              std::to_string(args->num_replicas) + " replicas x " +
                              std::to_string(args->num_partitions) + " partitions");
    }
    if (args->default_assignment_size < 1 || args->default_assignment == nullptr) {
      return invalid_argument("default_assignment has no room for one device id");
    }
    args->default_assignment[0] = 0;
    return Status();
  });
}

// ------------------------------------------------------------------------ topology

PJRT_Error* TopologyDescription_Destroy(PJRT_TopologyDescription_Destroy_Args* args) {
  // The client owns its topology; only topologies we never hand out would need freeing.
  return guarded(args, [] {});
}

PJRT_Error* TopologyDescription_PlatformName(PJRT_TopologyDescription_PlatformName_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->topology) return invalid_argument("PJRT_TopologyDescription_PlatformName: null");
    set_string(args->topology->client->platform_name, &args->platform_name,
               &args->platform_name_size);
    return Status();
  });
}

PJRT_Error* TopologyDescription_PlatformVersion(
    PJRT_TopologyDescription_PlatformVersion_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->topology) return invalid_argument("PJRT_TopologyDescription_PlatformVersion: null");
    set_string(args->topology->client->platform_version, &args->platform_version,
               &args->platform_version_size);
    return Status();
  });
}

PJRT_Error* TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->topology) return invalid_argument("PJRT_TopologyDescription_GetDeviceDescriptions: null");
    args->descriptions = args->topology->descriptions.data();
    args->num_descriptions = args->topology->descriptions.size();
    return Status();
  });
}

PJRT_Error* TopologyDescription_Attributes(PJRT_TopologyDescription_Attributes_Args* args) {
  return guarded(args, [&] {
    args->attributes = nullptr;
    args->num_attributes = 0;
  });
}

PJRT_Error* TopologyDescription_Fingerprint(PJRT_TopologyDescription_Fingerprint_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->topology) return invalid_argument("PJRT_TopologyDescription_Fingerprint: null");
    // FNV-1a over what distinguishes topologies: platform and device kind.
    uint64_t h = 1469598103934665603ull;
    for (const std::string* s : {&args->topology->client->platform_name,
                                 &args->topology->client->description.kind}) {
      for (unsigned char ch : *s) h = (h ^ ch) * 1099511628211ull;
    }
    args->fingerprint = h;
    return Status();
  });
}

// ------------------------------------------------------------------------ device description

PJRT_Error* DeviceDescription_Id(PJRT_DeviceDescription_Id_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device_description) return invalid_argument("PJRT_DeviceDescription_Id: null");
    args->id = args->device_description->id;
    return Status();
  });
}

PJRT_Error* DeviceDescription_ProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device_description) return invalid_argument("PJRT_DeviceDescription_ProcessIndex: null");
    args->process_index = args->device_description->process_index;
    return Status();
  });
}

PJRT_Error* DeviceDescription_Attributes(PJRT_DeviceDescription_Attributes_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device_description) return invalid_argument("PJRT_DeviceDescription_Attributes: null");
    args->attributes = args->device_description->attributes.data();
    args->num_attributes = args->device_description->attributes.size();
    return Status();
  });
}

PJRT_Error* DeviceDescription_Kind(PJRT_DeviceDescription_Kind_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device_description) return invalid_argument("PJRT_DeviceDescription_Kind: null");
    set_string(args->device_description->kind, &args->device_kind, &args->device_kind_size);
    return Status();
  });
}

PJRT_Error* DeviceDescription_DebugString(PJRT_DeviceDescription_DebugString_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device_description) return invalid_argument("PJRT_DeviceDescription_DebugString: null");
    set_string(args->device_description->debug_string, &args->debug_string,
               &args->debug_string_size);
    return Status();
  });
}

PJRT_Error* DeviceDescription_ToString(PJRT_DeviceDescription_ToString_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device_description) return invalid_argument("PJRT_DeviceDescription_ToString: null");
    set_string(args->device_description->to_string, &args->to_string, &args->to_string_size);
    return Status();
  });
}

// ------------------------------------------------------------------------ device

PJRT_Error* Device_GetDescription(PJRT_Device_GetDescription_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device) return invalid_argument("PJRT_Device_GetDescription: device is null");
    args->device_description = args->device->description;
    return Status();
  });
}

PJRT_Error* Device_IsAddressable(PJRT_Device_IsAddressable_Args* args) {
  return guarded(args, [&] { args->is_addressable = true; });
}

PJRT_Error* Device_LocalHardwareId(PJRT_Device_LocalHardwareId_Args* args) {
  return guarded(args, [&] { args->local_hardware_id = 0; });
}

PJRT_Error* Device_AddressableMemories(PJRT_Device_AddressableMemories_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device) return invalid_argument("PJRT_Device_AddressableMemories: device is null");
    args->memories = args->device->memories.data();
    args->num_memories = args->device->memories.size();
    return Status();
  });
}

PJRT_Error* Device_DefaultMemory(PJRT_Device_DefaultMemory_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device) return invalid_argument("PJRT_Device_DefaultMemory: device is null");
    args->memory = args->device->default_memory;
    return Status();
  });
}

PJRT_Error* Device_MemoryStats(PJRT_Device_MemoryStats_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device) return invalid_argument("PJRT_Device_MemoryStats: device is null");
    // jaxlib asks while it compiles, holding Python's GIL, which a host callback running on the
    // worker (or a jaxlib callback on the worker or MLX's stream thread, runtime/event.h) may be
    // waiting for: then MLX's counters (plain totals) are read from this thread.
    auto read = [] {
      // Live arrays include transfer blocks MLX adopted (counted by the memory governor).
      return std::array<size_t, 3>{runtime::live_bytes(), mx::get_peak_memory(),
                                   mx::get_memory_limit()};
    };
    auto done = std::make_shared<std::promise<std::array<size_t, 3>>>();
    std::future<std::array<size_t, 3>> ready = done->get_future();
    args->device->client->worker->post([read, done] { done->set_value(read()); });
    const bool on_worker = runtime::DeviceWorker::wait_unless_python_blocks([&] {
      return ready.wait_for(std::chrono::milliseconds(2)) == std::future_status::ready;
    });
    auto [active, peak, limit] = on_worker ? ready.get() : read();
    args->bytes_in_use = static_cast<int64_t>(active);
    args->peak_bytes_in_use = static_cast<int64_t>(peak);
    args->peak_bytes_in_use_is_set = true;
    args->bytes_limit = static_cast<int64_t>(limit);
    args->bytes_limit_is_set = limit > 0;
    args->num_allocs_is_set = false;
    args->largest_alloc_size_is_set = false;
    args->bytes_reserved_is_set = false;
    args->peak_bytes_reserved_is_set = false;
    args->bytes_reservable_limit_is_set = false;
    args->largest_free_block_bytes_is_set = false;
    args->pool_bytes_is_set = false;
    args->peak_pool_bytes_is_set = false;
    if (args->struct_size >= jaxmlx_pjrt_field_end(PJRT_Device_MemoryStats_Args,
                                                   peak_allocated_bytes_is_set)) {
      args->peak_allocated_bytes_is_set = false;
    }
    return Status();
  });
}

PJRT_Error* Device_GetAttributes(PJRT_Device_GetAttributes_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->device) return invalid_argument("PJRT_Device_GetAttributes: device is null");
    args->attributes = args->device->description->attributes.data();
    args->num_attributes = args->device->description->attributes.size();
    args->device_attributes = nullptr;  // the description owns them
    args->attributes_deleter = [](PJRT_Device_Attributes*) {};
    return Status();
  });
}

PJRT_Error* Device_CreateAsyncTrackingEvent(PJRT_Device_CreateAsyncTrackingEvent_Args* args) {
  return guarded(args, [&] {
    auto* event = new PJRT_AsyncTrackingEvent;
    if (args->description) event->description.assign(args->description, args->description_size);
    args->event = event;
  });
}

PJRT_Error* AsyncTrackingEvent_Destroy(PJRT_AsyncTrackingEvent_Destroy_Args* args) {
  return guarded(args, [&] { delete args->event; });
}

// ------------------------------------------------------------------------ memory

namespace {
void* memory_get_user_data(PJRT_Memory* memory, const void* key) {
  Memory* m = as_memory(memory);
  std::lock_guard<std::mutex> lock(m->mu);
  auto it = m->user_data.find(key);
  return it == m->user_data.end() ? nullptr : it->second.first;
}

void memory_set_user_data(PJRT_Memory* memory, const void* key, void* data, void (*dtor)(void*)) {
  Memory* m = as_memory(memory);
  std::pair<void*, void (*)(void*)> old{nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(m->mu);
    auto& slot = m->user_data[key];
    old = slot;
    slot = {data, dtor};
  }
  if (old.second && old.first) old.second(old.first);
}

const PJRT_Memory_FunctionTable kMemoryFunctionTable = {
    PJRT_Memory_FunctionTable_STRUCT_SIZE, nullptr, PJRT_Memory_STRUCT_SIZE,
    memory_get_user_data, memory_set_user_data,
};
}  // namespace

Memory::Memory() { vtable = &kMemoryFunctionTable; }

Memory::~Memory() {
  for (auto& [key, value] : user_data) {
    if (value.second && value.first) value.second(value.first);
  }
}

PJRT_Error* Memory_Id(PJRT_Memory_Id_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->memory) return invalid_argument("PJRT_Memory_Id: memory is null");
    args->id = as_memory(args->memory)->id;
    return Status();
  });
}

PJRT_Error* Memory_Kind(PJRT_Memory_Kind_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->memory) return invalid_argument("PJRT_Memory_Kind: memory is null");
    set_string(as_memory(args->memory)->kind, &args->kind, &args->kind_size);
    return Status();
  });
}

PJRT_Error* Memory_Kind_Id(PJRT_Memory_Kind_Id_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->memory) return invalid_argument("PJRT_Memory_Kind_Id: memory is null");
    args->kind_id = 0;
    return Status();
  });
}

PJRT_Error* Memory_DebugString(PJRT_Memory_DebugString_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->memory) return invalid_argument("PJRT_Memory_DebugString: memory is null");
    set_string(as_memory(args->memory)->debug_string, &args->debug_string,
               &args->debug_string_size);
    return Status();
  });
}

PJRT_Error* Memory_ToString(PJRT_Memory_ToString_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->memory) return invalid_argument("PJRT_Memory_ToString: memory is null");
    set_string(as_memory(args->memory)->to_string, &args->to_string, &args->to_string_size);
    return Status();
  });
}

PJRT_Error* Memory_AddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->memory) return invalid_argument("PJRT_Memory_AddressableByDevices: memory is null");
    args->devices = as_memory(args->memory)->devices.data();
    args->num_devices = as_memory(args->memory)->devices.size();
    return Status();
  });
}

}  // namespace jaxmlx::pjrt
