// The plugin's definitions of the PJRT handle types that abi.h leaves opaque.
//
// Ownership: the client owns its device, description, memory and topology (they live as long as
// the client). Buffers and events are owned by the caller, who destroys them; each buffer keeps
// the device worker alive, so a buffer that outlives its client still frees safely. Buffers and
// loaded executables share the client's `alive` flag: once the client is destroyed, the calls
// that would reach it through them fail with FAILED_PRECONDITION instead of touching freed memory.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pjrt/abi.h"
#include "runtime/buffer.h"
#include "runtime/device_worker.h"
#include "runtime/event.h"

namespace jaxmlx::pjrt {
struct Memory;
}

struct PJRT_DeviceDescription {
  int id = 0;
  int process_index = 0;
  std::string kind;
  std::string debug_string;
  std::string to_string;
  std::vector<PJRT_NamedValue> attributes;
};

struct PJRT_Device {
  PJRT_Client* client = nullptr;
  PJRT_DeviceDescription* description = nullptr;
  std::vector<PJRT_Memory*> memories;
  PJRT_Memory* default_memory = nullptr;
};

struct PJRT_TopologyDescription {
  PJRT_Client* client = nullptr;
  std::vector<PJRT_DeviceDescription*> descriptions;
};

struct PJRT_Client {
  ~PJRT_Client() { alive->store(false); }
  std::shared_ptr<std::atomic<bool>> alive = std::make_shared<std::atomic<bool>>(true);
  std::shared_ptr<jaxmlx::runtime::DeviceWorker> worker;
  std::string platform_name;
  std::string platform_version;
  PJRT_DeviceDescription description;
  PJRT_Device device;
  std::unique_ptr<jaxmlx::pjrt::Memory> memory;
  std::vector<PJRT_Device*> devices;
  std::vector<PJRT_Memory*> memories;
  PJRT_TopologyDescription topology;
};

struct PJRT_Buffer {
  PJRT_Client* client = nullptr;  // valid while *client_alive
  std::shared_ptr<const std::atomic<bool>> client_alive;
  std::shared_ptr<jaxmlx::runtime::DeviceWorker> worker;  // outlives the client if need be
  std::shared_ptr<jaxmlx::runtime::Buffer> buffer;
  std::vector<int64_t> minor_to_major;  // backing store for GetMemoryLayout
  std::mutex mu;
  int external_references = 0;  // guarded by mu
};

struct PJRT_Event {
  jaxmlx::runtime::Event event;
};

struct PJRT_AsyncTrackingEvent {
  std::string description;
};

namespace jaxmlx::pjrt {

// The one memory space ("device") of a device. jaxlib (minor >= 105) reaches it through the
// function-table prefix to store its own data under opaque keys.
struct Memory : PJRT_Memory {
  Memory();
  ~Memory();
  PJRT_Client* client = nullptr;
  int id = 0;
  std::string kind = "device";
  std::string debug_string;
  std::string to_string;
  std::vector<PJRT_Device*> devices;
  std::mutex mu;
  std::map<const void*, std::pair<void*, void (*)(void*)>> user_data;  // guarded by mu
};

inline Memory* as_memory(PJRT_Memory* m) { return static_cast<Memory*>(m); }

// A new caller-owned event handle for `event`.
PJRT_Event* new_event(runtime::Event event);

// A new caller-owned buffer handle of `client` for `buffer`.
PJRT_Buffer* new_buffer(PJRT_Client* client, std::shared_ptr<runtime::Buffer> buffer);

// FAILED_PRECONDITION naming `what` when the client behind `alive` has been destroyed.
Status check_client_alive(const std::shared_ptr<const std::atomic<bool>>& alive,
                          std::string_view what);

}  // namespace jaxmlx::pjrt
