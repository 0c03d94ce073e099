// Event: a one-shot completion signal carrying a Status, the basis of PJRT_Event.
//
// Thread-safe. Copies share one state. Callbacks registered with on_ready run exactly once: at
// registration if the event is already set, else on the thread that calls set().
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
  void on_ready(Callback callback) const;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
    bool callbacks_done = false;  // set after the callbacks registered before set() ran
    Status status;
    std::vector<Callback> callbacks;
  };
  std::shared_ptr<State> state_;
};

}  // namespace jaxmlx::runtime
