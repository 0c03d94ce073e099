#include "runtime/device_worker.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>

#include <exception>
#include <future>
#include <mutex>
#include <new>
#include <string_view>

#include "mlx/backend/metal/metal.h"
#include "lower/host_callback.h"
#include "mlx/mlx.h"
#include "runtime/cuda_exit_order.h"
#include "runtime/event.h"
#include "runtime/memory_governor.h"
#include "runtime/metal_settings.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

// How long a lazy task may wait for an urgent one to carry it (DeviceWorker::post_lazy).
constexpr std::chrono::milliseconds kLazyDelay{2};

// The worker a thread runs a task for (DeviceWorker::run_here_if_idle), if any.
thread_local const DeviceWorker* t_acting_for = nullptr;

// While a thread runs tasks in the worker's place: it counts as the worker, and MLX's ops and
// evaluations on it use the worker's stream. The thread's own default stream comes back
// afterwards (made first if it had none, as MLX would on its first op: MLX cannot unset one).
class ActingAsWorker {
 public:
  ActingAsWorker(const DeviceWorker* worker, mx::Stream stream) : previous_(stream) {
    t_acting_for = worker;
    std::optional<mx::Stream> own = mx::peek_default_stream(stream.device);
    previous_ = own ? *own : mx::default_stream(stream.device);
    mx::set_default_stream(stream);
  }
  ~ActingAsWorker() {
    mx::set_default_stream(previous_);
    t_acting_for = nullptr;
  }
  ActingAsWorker(const ActingAsWorker&) = delete;
  ActingAsWorker& operator=(const ActingAsWorker&) = delete;

 private:
  mx::Stream previous_;
};

}  // namespace

Status guard(const char* what, const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    // An allocation failure is the user's to fix (smaller work or a higher limit), never an
    // abort: report it with the memory numbers.
    if (is_allocation_failure(e)) return memory_exhausted(what, 0, e.what());
    return internal_error(std::string(what) + ": " + e.what());
  } catch (...) {
    return internal_error(std::string(what) + ": unknown exception");
  }
}

namespace {

// The process's shared worker (DeviceWorker::shared), if one is alive.
struct SharedWorker {
  std::mutex mu;
  std::weak_ptr<DeviceWorker> current;
  // The exit handler's reference to a worker that could not finish: never joined, never
  // destroyed (this struct never is), and reachable for leak checkers.
  std::shared_ptr<DeviceWorker> unfinished;
};
SharedWorker& shared_worker() {
  static SharedWorker* w = new SharedWorker;  // never destroyed: the exit handler reads it
  return *w;
}

// The process that made the threads the exit drain waits for (a forked child has none of them).
std::atomic<pid_t> g_drain_pid{0};
std::atomic<bool> g_completions_made{false};  // DeviceWorker::completions() was called

}  // namespace

std::shared_ptr<DeviceWorker> DeviceWorker::shared() {
  SharedWorker& sw = shared_worker();
  std::lock_guard<std::mutex> lock(sw.mu);
  std::shared_ptr<DeviceWorker> worker = sw.current.lock();
  if (!worker) {
    worker = std::make_shared<DeviceWorker>();
    sw.current = worker;
  }
  return worker;
}

TaskThread& DeviceWorker::completions() {
  static TaskThread* t = [] {
    g_completions_made.store(true);
    return new TaskThread("jaxmlx-gpu-done");
  }();
  return *t;
}

void DeviceWorker::drain_at_exit_before_mlx() {
  g_drain_pid.store(getpid());
  std::atexit([] {
    if (getpid() != g_drain_pid.load()) return;
    constexpr std::chrono::milliseconds kBudget{1000};
    if (g_completions_made.load()) completions().drain_for(kBudget);  // it frees runs' arrays
    SharedWorker& sw = shared_worker();
    std::shared_ptr<DeviceWorker> worker;
    {
      std::lock_guard<std::mutex> lock(sw.mu);
      worker = sw.current.lock();
    }
    // A worker that could not finish is never joined: the handler keeps its reference.
    if (worker && !worker->drain_for(kBudget)) {
      std::lock_guard<std::mutex> lock(sw.mu);
      sw.unfinished = std::move(worker);
    }
  });
}

DeviceWorker::DeviceWorker() {
  // MLX's CUDA backend multiplies f32 matrices in TF32 unless told otherwise (10-bit mantissas:
  // 1e-3 relative error, measured on an H200 against jax's CPU backend). Our results must match
  // the CPU backend's f32, so TF32 is off unless the user asked for it. Set before MLX first
  // reads it; no effect on Metal or the CPU.
  setenv("MLX_ENABLE_TF32", "0", /*overwrite=*/0);
  apply_metal_settings();
  const char* lend = std::getenv("JAXMLX_CALLER_RUNS");
  lend_ = lend == nullptr || std::string_view(lend) != "0";
  if (const char* spin = std::getenv("JAXMLX_WORKER_SPIN_US")) {
    long us = std::strtol(spin, nullptr, 10);
    queue_->spin = std::chrono::microseconds(std::clamp(us, 0L, 1000000L));
  }
  thread_ = Thread(size_t{64} << 20, [queue = queue_] { loop(queue); });
  thread_id_ = thread_.get_id();
  Status st = run_sync([this] { return init_device(); });
  if (!st.ok()) info_.description = "MLX device failed to initialize: " + st.to_string();
}

DeviceWorker::~DeviceWorker() {
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    queue_->stopping = true;
  }
  queue_->posted.fetch_add(1, std::memory_order_release);  // ends a poll
  queue_->cv.notify_all();
  if (!thread_.joinable()) return;
  // The last owner may be a task running on the worker itself (an in-flight execution holding
  // the client's worker): it cannot join itself, so the thread finishes the queue and exits alone.
  if (on_worker_thread()) {
    thread_.detach();
    return;
  }
  thread_.join();
}

Status DeviceWorker::init_device() {
  return guard("MLX device init", [this] {
    bool gpu = mx::gpu::is_available();
    bool metal = gpu && mx::metal::is_available();
    mx::Device dev = gpu ? mx::Device(mx::Device::gpu, 0) : mx::Device(mx::Device::cpu, 0);
    mx::set_default_device(dev);
    // A stream another thread may use in the worker's place (run_here_if_idle): MLX keeps the
    // command encoders of other streams per thread. On MLX's CPU and CUDA backends; Metal keeps
    // the worker's own stream (no Mac here to check Metal's encoders from a second thread).
    if (!metal) {
      shared_stream_ = new_shared_stream(dev, /*cuda=*/gpu);
      mx::set_default_stream(*shared_stream_);
    }
    info_.is_gpu = gpu;
    info_.is_metal = metal;
    const auto& props = mx::device_info(dev);
    std::string name;
    if (auto it = props.find("device_name"); it != props.end()) {
      if (auto* s = std::get_if<std::string>(&it->second)) name = *s;
    }
    for (const char* key : {"total_memory", "memory_size"}) {
      auto it = props.find(key);
      if (it == props.end()) continue;
      if (auto* n = std::get_if<size_t>(&it->second)) info_.memory_bytes = *n;
      break;
    }
    configure_memory_governor(info_.memory_bytes);
    // MLX's allocator exists before the exit drain is registered, so the drain runs first.
    (void)mx::get_active_memory();
    static std::once_flag exit_drain;
    std::call_once(exit_drain, drain_at_exit_before_mlx);
    info_.kind = gpu ? (name.empty() ? "MLX gpu" : name) : "MLX cpu";
    info_.description = gpu ? "MLX gpu (" + info_.kind + ")" : "MLX cpu";
    return Status();
  });
}

bool DeviceWorker::on_worker_thread() const {
  return std::this_thread::get_id() == thread_id_ || t_acting_for == this;
}

bool DeviceWorker::on_borrowing_thread() const {
  return t_acting_for == this && std::this_thread::get_id() != thread_id_;
}

void DeviceWorker::post(std::function<void()> task) { enqueue(std::move(task), false); }

bool DeviceWorker::run_here_if_idle(std::function<void()>& task) {
  if (!lend_ || !shared_stream_ || t_acting_for != nullptr || on_worker_thread()) return false;
  // The task may wait for MLX's stream thread (MLX bounds the tasks in flight; the memory
  // governor synchronizes), which may be running a completion that calls into jaxlib: from now
  // on such callbacks go to the notifier thread (event.h), and one already running means no.
  WaitingForWorker waiting;
  if (external_callbacks_running()) return false;
  std::deque<Task> queued;
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    Queue& q = *queue_;
    if (q.running || q.borrowed || q.urgent > 0 || q.stopping) return false;
    q.borrowed = true;
    queued.swap(q.tasks);  // lazy ones only (no urgent task is queued)
  }
  {
    ActingAsWorker acting(this, *shared_stream_);
    for (Task& t : queued) {
      t.fn();
      t.fn = nullptr;
    }
    task();
    task = nullptr;
  }
  bool wake;
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    queue_->borrowed = false;
    // Only a worker that woke for work posted meanwhile (or to stop) waits for us.
    wake = !queue_->tasks.empty() || queue_->stopping;
  }
  if (wake) queue_->cv.notify_one();
  return true;
}

void DeviceWorker::post_lazy(std::function<void()> task) { enqueue(std::move(task), true); }

void DeviceWorker::enqueue(std::function<void()> task, bool lazy) {
  if (on_worker_thread()) {
    task();
    return;
  }
  bool wake;
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    queue_->tasks.push_back(Task{std::move(task), lazy});
    if (!lazy) {
      ++queue_->urgent;
      queue_->posted.fetch_add(1, std::memory_order_release);
    }
    wake = !lazy || queue_->deep_sleep;
  }
  if (wake) queue_->cv.notify_one();
}

bool DeviceWorker::drain_for(std::chrono::milliseconds budget) {
  if (on_worker_thread()) return true;
  WaitingForWorker waiting;  // jaxlib's callbacks leave our threads meanwhile (event.h)
  // Posted urgent: it runs after the lazy tasks queued before it.
  return wait_for_turn([this](std::function<void()> task) { post(std::move(task)); }, budget);
}

Status DeviceWorker::run_sync(const std::function<Status()>& fn) {
  if (on_worker_thread()) return guard("device task", fn);
  WaitingForWorker waiting;  // jaxlib's callbacks leave our threads meanwhile (event.h)
  std::promise<Status> done;
  auto result = done.get_future();
  post([&] { done.set_value(guard("device task", fn)); });
  return result.get();
}

bool DeviceWorker::wait_unless_python_blocks(const std::function<bool()>& wait_a_little) {
  WaitingForWorker waiting;  // jaxlib's callbacks leave our threads meanwhile (event.h)
  while (!wait_a_little())
    if (lower::host_callback_running() || external_callbacks_running()) return false;
  return true;
}

void DeviceWorker::loop(std::shared_ptr<Queue> queue) {
  set_this_thread_name("jaxmlx-worker");
  DeferEventCallbacks defer;  // jaxlib's callbacks never run here (event.h)
  Queue& q = *queue;
  std::unique_lock<std::mutex> lock(q.mu);
  bool spun = false;  // polled already in this idle spell (JAXMLX_WORKER_SPIN_US)
  for (;;) {
    if (q.borrowed) {
      // Another thread runs a task in the worker's place: it wakes us if work came meanwhile.
      q.cv.wait(lock, [&] { return !q.borrowed; });
      continue;
    }
    if (q.urgent == 0 && !q.stopping && q.spin.count() > 0 && !spun) {
      // Poll before sleeping (JAXMLX_WORKER_SPIN_US): once per idle spell.
      spun = true;
      const uint64_t seen = q.posted.load(std::memory_order_acquire);
      const auto until = std::chrono::steady_clock::now() + q.spin;
      lock.unlock();
      while (q.posted.load(std::memory_order_acquire) == seen &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      q.polls.fetch_add(1);
      lock.lock();
      continue;
    }
    if (q.urgent == 0 && !q.stopping) {
      // Light sleep: lazy tasks queued now wait for the next urgent task, or for the timeout.
      q.cv.wait_for(lock, kLazyDelay, [&] { return q.urgent > 0 || q.stopping; });
      if (q.urgent == 0 && !q.stopping && q.tasks.empty()) {
        // Deep sleep: idle; from now on a lazy task wakes the worker when it is posted.
        q.deep_sleep = true;
        q.cv.wait(lock, [&] { return q.urgent > 0 || q.stopping || !q.tasks.empty(); });
        q.deep_sleep = false;
        continue;
      }
    }
    if (q.borrowed) continue;
    // Drain everything queued before stopping: pending frees and transfers must complete.
    if (q.tasks.empty()) {
      if (q.stopping) return;
      continue;
    }
    Task task = std::move(q.tasks.front());
    q.tasks.pop_front();
    if (!task.lazy) {
      --q.urgent;
      spun = false;  // a new idle spell may poll again
    }
    q.running = true;
    lock.unlock();
    task.fn();
    task.fn = nullptr;  // whatever the task held is released outside the lock
    lock.lock();
    q.running = false;
  }
}

}  // namespace jaxmlx::runtime
