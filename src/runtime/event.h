// Event: a one-shot completion signal carrying a Status, the basis of PJRT_Event.
//
// Thread-safe. Copies share one state. Callbacks registered with on_ready run exactly once: at
// registration if the event is already set, else on the thread that calls set() -- unless one of
// them is external (jaxlib's, through PJRT_Event_OnReady) and that thread defers external
// callbacks (DeferEventCallbacks): then all of them run on the notifier thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"

namespace jaxmlx::runtime {

class Event {
 public:
  using Callback = std::function<void(const Status&)>;

  Event();
  static Event ready(Status status = Status());

  // Sets the event once; later calls are ignored (the first status wins).
  void set(Status status = Status()) const;
  bool is_ready() const;
  // Blocks until set; returns the status it was set with.
  Status await() const;
  // The status; OK while not ready.
  Status status() const;
  // external: the callback is not the plugin's own (it may block, e.g. on Python's GIL).
  void on_ready(Callback callback, bool external = false) const;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
    bool callbacks_done = false;  // set after the callbacks registered before set() ran
    bool has_external = false;    // an external callback is among `callbacks`
    Status status;
    std::vector<Callback> callbacks;
  };
  std::shared_ptr<State> state_;
};

// Python's GIL and the plugin's own threads. jaxlib's callbacks take the GIL, and a Python
// thread holding it may wait for the device worker (compiling: the trial run; memory stats):
// if the worker's work waits for a thread that is inside a jaxlib callback -- the worker
// itself, or MLX's stream thread running a run's completion task -- nothing moves again (jax
// compiling waits for the worker, whose mx::eval waits for MLX's stream thread, which waits for
// the GIL). So, on threads marked with DeferEventCallbacks, events with an external callback
// run their callbacks inline (the fast path: the waiting caller is woken directly) unless a
// GIL holder is waiting for the worker (a WaitingForWorker lives), and then on the notifier
// thread, which nothing in the plugin waits for. A waiter that finds an external callback
// already running there (external_callbacks_running()) must not wait: both sides check the
// other's counter after raising their own, so at least one of them sees the other.
class DeferEventCallbacks {
 public:
  DeferEventCallbacks();
  ~DeferEventCallbacks();
  DeferEventCallbacks(const DeferEventCallbacks&) = delete;
  DeferEventCallbacks& operator=(const DeferEventCallbacks&) = delete;

 private:
  bool was_;
};

class WaitingForWorker {
 public:
  WaitingForWorker();
  ~WaitingForWorker();
  WaitingForWorker(const WaitingForWorker&) = delete;
  WaitingForWorker& operator=(const WaitingForWorker&) = delete;
};

// True while a thread marked with DeferEventCallbacks runs an external callback inline.
bool external_callbacks_running();

}  // namespace jaxmlx::runtime
