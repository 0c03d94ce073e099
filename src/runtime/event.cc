#include "runtime/event.h"

#include <atomic>
#include <deque>
#include <thread>
#include <utility>

#include "base/thread.h"

namespace jaxmlx::runtime {
namespace {

thread_local bool t_defer_callbacks = false;
std::atomic<int> g_waiting_for_worker{0};
std::atomic<int> g_external_running{0};

// Runs deferred callbacks in the order their events were set. Never destroyed: the thread may
// be blocked in a callback (waiting for Python's GIL) when the process exits.
class Notifier {
 public:
  static Notifier& get() {
    static Notifier* n = new Notifier();
    return *n;
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  Notifier() { std::thread([this] { loop(); }).detach(); }
  void loop() {
    set_this_thread_name("jaxmlx-notify");
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !tasks_.empty(); });
      std::function<void()> fn = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      fn();
      fn = nullptr;  // what the task held is released outside the lock
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
};

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
    Notifier::get().post(std::move(run));
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
