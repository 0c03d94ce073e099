// PJRT entry points of events.
#include "pjrt/entry_points.h"
#include "pjrt/errors.h"
#include "pjrt/objects.h"

namespace jaxmlx::pjrt {

PJRT_Event* new_event(runtime::Event event) { return new PJRT_Event{std::move(event)}; }

PJRT_Error* Event_Destroy(PJRT_Event_Destroy_Args* args) {
  return guarded(args, [&] { delete args->event; });
}

PJRT_Error* Event_IsReady(PJRT_Event_IsReady_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->event) return invalid_argument("PJRT_Event_IsReady: event is null");
    args->is_ready = args->event->event.is_ready();
    return Status();
  });
}

PJRT_Error* Event_Error(PJRT_Event_Error_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->event) return invalid_argument("PJRT_Event_Error: event is null");
    if (!args->event->event.is_ready()) {
      return failed_precondition("PJRT_Event_Error called before the event is ready");
    }
    return args->event->event.status();
  });
}

PJRT_Error* Event_Await(PJRT_Event_Await_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->event) return invalid_argument("PJRT_Event_Await: event is null");
    return args->event->event.await();
  });
}

PJRT_Error* Event_OnReady(PJRT_Event_OnReady_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->event) return invalid_argument("PJRT_Event_OnReady: event is null");
    if (!args->callback) return invalid_argument("PJRT_Event_OnReady: callback is null");
    auto callback = args->callback;
    void* user_arg = args->user_arg;
    // The callback owns the error it receives (null on success). jaxlib's callbacks may take
    // Python's GIL: external, so never run on the worker or MLX's stream thread (event.h).
    args->event->event.on_ready(
        [callback, user_arg](const Status& st) { callback(make_error(st), user_arg); },
        /*external=*/true);
    return Status();
  });
}

PJRT_Error* Event_Create(PJRT_Event_Create_Args* args) {
  return guarded(args, [&] { args->event = new_event(runtime::Event()); });
}

PJRT_Error* Event_Set(PJRT_Event_Set_Args* args) {
  return guarded(args, [&]() -> Status {
    if (!args->event) return invalid_argument("PJRT_Event_Set: event is null");
    std::string message;
    if (args->error_message) message.assign(args->error_message, args->error_message_size);
    args->event->event.set(Status(static_cast<Code>(args->error_code), std::move(message)));
    return Status();
  });
}

}  // namespace jaxmlx::pjrt
