// Thread: see thread.h.
#include "base/thread.h"

#include <cstring>
#include <exception>
#include <future>
#include <string>
#include <system_error>
#include <utility>

namespace jaxmlx {
namespace {

struct Start {
  std::function<void()> fn;
  std::promise<std::thread::id> id;
};

void* trampoline(void* p) {
  std::function<void()> fn;
  {
    auto* start = static_cast<Start*>(p);
    fn = std::move(start->fn);
    start->id.set_value(std::this_thread::get_id());
    delete start;
  }
  fn();
  return nullptr;
}

}  // namespace

Thread::Thread(size_t stack_bytes, std::function<void()> fn) {
  auto* start = new Start{std::move(fn), {}};
  std::future<std::thread::id> id = start->id.get_future();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  int rc = pthread_attr_setstacksize(&attr, stack_bytes);
  if (rc == 0) rc = pthread_create(&handle_, &attr, &trampoline, start);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    delete start;
    throw std::system_error(rc, std::generic_category(), "starting a thread");
  }
  joinable_ = true;
  id_ = id.get();
}

Thread::Thread(Thread&& o) noexcept
    : handle_(o.handle_), joinable_(std::exchange(o.joinable_, false)), id_(o.id_) {}

Thread& Thread::operator=(Thread&& o) noexcept {
  if (joinable_) std::terminate();
  handle_ = o.handle_;
  joinable_ = std::exchange(o.joinable_, false);
  id_ = o.id_;
  return *this;
}

Thread::~Thread() {
  if (joinable_) std::terminate();
}

void Thread::join() {
  if (!joinable_) throw std::system_error(std::make_error_code(std::errc::invalid_argument));
  int rc = pthread_join(handle_, nullptr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "joining a thread");
  joinable_ = false;
}

void Thread::detach() {
  if (!joinable_) throw std::system_error(std::make_error_code(std::errc::invalid_argument));
  pthread_detach(handle_);
  joinable_ = false;
}

TaskThread::TaskThread(const char* name) {
  std::string n = name;
  std::thread t([this, n] {
    set_this_thread_name(n.c_str());
    loop();
  });
  id_ = t.get_id();
  t.detach();
}

bool wait_for_turn(const std::function<void(std::function<void()>)>& post,
                   std::chrono::milliseconds budget) {
  // Shared: a task that runs after the wait gave up still has its promise.
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> ran = done->get_future();
  post([done] { done->set_value(); });
  return ran.wait_for(budget) == std::future_status::ready;
}

bool TaskThread::drain_for(std::chrono::milliseconds budget) {
  if (std::this_thread::get_id() == id_) return true;
  return wait_for_turn([this](std::function<void()> task) { post(std::move(task)); }, budget);
}

void TaskThread::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void TaskThread::loop() {
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

void set_this_thread_name(const char* name) {
  char cut[16] = {};
  std::strncpy(cut, name, sizeof(cut) - 1);
#if defined(__APPLE__)
  pthread_setname_np(cut);  // macOS names only the calling thread
#else
  pthread_setname_np(pthread_self(), cut);
#endif
}

}  // namespace jaxmlx
