#include "runtime/event.h"

namespace jaxmlx::runtime {

Event::Event() : state_(std::make_shared<State>()) {}

Event Event::ready(Status status) {
  Event e;
  e.set(std::move(status));
  return e;
}

void Event::set(Status status) const {
  std::vector<Callback> callbacks;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->ready) return;
    state_->ready = true;
    state_->status = std::move(status);
    callbacks.swap(state_->callbacks);
  }
  // Outside the lock: a callback may register more callbacks or destroy its owner. Waiters
  // wake only after the callbacks ran, so Await implies OnReady callbacks have completed.
  for (auto& cb : callbacks) cb(state_->status);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->callbacks_done = true;
  }
  state_->cv.notify_all();
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

void Event::on_ready(Callback callback) const {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->ready) {
      state_->callbacks.push_back(std::move(callback));
      return;
    }
  }
  callback(state_->status);
}

}  // namespace jaxmlx::runtime
