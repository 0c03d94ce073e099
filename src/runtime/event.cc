#include "runtime/event.h"

#include <atomic>
#include <utility>

#include "base/thread.h"

namespace jaxmlx::runtime {
namespace {

thread_local bool t_defer_callbacks = false;
std::atomic<int> g_waiting_for_worker{0};
std::atomic<int> g_external_running{0};

// Runs deferred callbacks in the order their events were set.
TaskThread& notifier() {
  static TaskThread* t = new TaskThread("jaxmlx-notify");
  return *t;
}

}  // namespace

DeferEventCallbacks::DeferEventCallbacks() : was_(t_defer_callbacks) { t_defer_callbacks = true; }
DeferEventCallbacks::~DeferEventCallbacks() { t_defer_callbacks = was_; }
WaitingForWorker::WaitingForWorker() { g_waiting_for_worker.fetch_add(1); }
WaitingForWorker::~WaitingForWorker() { g_waiting_for_worker.fetch_sub(1); }
bool external_callbacks_running() { return g_external_running.load() > 0; }

Event::Event() : state_(std::make_shared<State>()) {}

Event Event::ready(Status status) {
  Event e;
  e.set(std::move(status));
  return e;
}

void Event::set(Status status) const {
  std::vector<Callback> callbacks;
  bool external = false;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->ready) return;
    state_->ready = true;
    state_->status = std::move(status);
    callbacks.swap(state_->callbacks);
    external = state_->has_external;
  }
  // Outside the lock: a callback may register more callbacks or destroy its owner. Waiters
  // wake only after the callbacks ran, so Await implies OnReady callbacks have completed.
  auto run = [state = state_, callbacks = std::move(callbacks)]() mutable {
    for (auto& cb : callbacks) cb(state->status);
    callbacks.clear();
    {
      std::lock_guard<std::mutex> lock(state->mu);
      state->callbacks_done = true;
    }
    state->cv.notify_all();
  };
  if (!t_defer_callbacks || !external) return run();
  // Raise our counter, then look at the waiters' (seq_cst): see WaitingForWorker.
  g_external_running.fetch_add(1);
  if (g_waiting_for_worker.load() > 0) {
    g_external_running.fetch_sub(1);
    notifier().post(std::move(run));
    return;
  }
  run();
  g_external_running.fetch_sub(1);
}

bool Event::is_ready() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->ready;
}

Status Event::await() const {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->callbacks_done; });
  return state_->status;
}

Status Event::status() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->status;
}

void Event::on_ready(Callback callback, bool external) const {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->ready) {
      state_->has_external |= external;
      state_->callbacks.push_back(std::move(callback));
      return;
    }
  }
  callback(state_->status);
}

}  // namespace jaxmlx::runtime
