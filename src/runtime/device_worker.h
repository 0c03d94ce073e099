// DeviceWorker: the one thread that touches MLX for a device.
//
// MLX streams are thread-local and MLX is not safe to drive from several threads, so every MLX
// call (array creation, eval, transfers, frees) is posted here and runs in FIFO order. Tasks
// posted from the worker itself run inline, so nested waits cannot deadlock.
// Thread-safe. Owned by the client; destruction drains the queue and joins the thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "base/thread.h"
#include "mlx/stream.h"

namespace jaxmlx::runtime {

struct DeviceInfo {
  bool is_gpu = false;
  bool is_metal = false;    // the GPU is Apple's (MLX's Metal backend); else CUDA or none
  std::string kind;         // "MLX cpu", or the GPU's name
  std::string description;  // one line for repr/debug strings
  size_t memory_bytes = 0;  // total memory MLX reports (0 when unknown)
};

class DeviceWorker {
 public:
  // The process's worker, shared by every client: MLX must be driven from one thread, so two
  // clients alive at once must not each start their own. A new one starts when the last owner
  // of the previous one is gone.
  static std::shared_ptr<DeviceWorker> shared();

  // Starts the thread and selects MLX's GPU when it has one, else its CPU.
  // JAXMLX_WORKER_SPIN_US=N (read here; default 0): after its last task the worker polls for
  // up to N µs for the next before it sleeps, so that a run posted meanwhile starts at once on
  // a core whose caches still hold MLX's working set. Costs that core's time while it polls.
  DeviceWorker();
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  const DeviceInfo& info() const { return info_; }

  // Runs `task` on the worker, in order. The task must not throw: wrap MLX calls with guard().
  void post(std::function<void()> task);
  // Like post, for work nobody waits for (freeing a buffer's array): queued in the same order,
  // but it does not wake a worker that ran something within the last 2 ms; it runs before
  // the next task posted, or when that delay passes. Saves the caller a thread wake-up per
  // deletion (jax frees the previous call's outputs on every call of a loop).
  void post_lazy(std::function<void()> task);

  // Runs `fn` on the worker and waits for its Status. Inline when called from the worker.
  Status run_sync(const std::function<Status()>& fn);

  // Waits up to `budget` for everything queued so far (lazy tasks too) to run; false when it
  // did not (a task blocked). True at once on the worker, which cannot wait for itself.
  bool drain_for(std::chrono::milliseconds budget);

  // At the process's exit, C++ destroys MLX's statics (its allocator and buffer cache, its
  // streams) in the reverse order they were made, interleaved with the std::atexit handlers.
  // A worker still running queued work then -- the frees jax posts lazily while Python
  // finalizes run up to 2 ms later -- would use MLX while it is destroyed (a double free in
  // MLX's buffer cache, seen under ASan). This registers a handler, run before the
  // destructors of the MLX statics made so far, that lets the completions thread and then the
  // shared() worker finish what is queued, waiting at most a second for each (a task waiting
  // for a finalized Python's GIL never finishes). Called when a worker has set MLX up and
  // after a process's first run, which makes MLX's kernel caches; idempotent at exit.
  static void drain_at_exit_before_mlx();

  // The thread that waits for the kernels of runs on MLX's CUDA backend, in the order they
  // were issued, and then signals their outputs (runtime/executable.cc).
  static TaskThread& completions();

  // For a caller that may hold Python's GIL (jaxlib compiling, asking for memory stats) and
  // waits for work it posted here: calls `wait_a_little()` (a short timed wait on that work,
  // true once it is done) until it returns true, or returns false as soon as the worker may be
  // waiting for the GIL itself -- a host callback is running, or a jaxlib callback runs on one
  // of our threads (runtime/event.h) -- and the caller must not wait on.
  static bool wait_unless_python_blocks(const std::function<bool()>& wait_a_little);

  // Runs `task` on the calling thread in the worker's place, if the worker is idle with no
  // urgent work queued: queued lazy tasks run first (FIFO), then `task`, with this thread
  // counting as the worker (on_worker_thread(); posts from it run inline) and the MLX stream
  // of the worker as its default stream; the worker starts nothing meanwhile. False, with
  // nothing run, when the worker is busy, MLX runs on Metal, or a jaxlib callback is
  // running on one of our threads (it may wait for Python's GIL, which the caller may hold).
  // Saves the caller -> worker thread hand-off on a small run (bench/README.md, "Runs on the
  // calling thread"). JAXMLX_CALLER_RUNS=0 (read when the worker starts) turns it off. The
  // task must not wait for work it posts. When it ran, `task` is left
  // empty (what it held is released in the worker's place too).
  bool run_here_if_idle(std::function<void()>& task);

  // How many idle spells the worker has polled through (JAXMLX_WORKER_SPIN_US); for tests.
  uint64_t idle_polls() const { return queue_->polls.load(); }

  // The worker's thread, or a thread running a task in its place (run_here_if_idle).
  bool on_worker_thread() const;
  // A thread running a task in the worker's place (run_here_if_idle), not the worker's own.
  bool on_borrowing_thread() const;

 private:
  // The queue outlives this object while the thread drains it (see the destructor).
  struct Task {
    std::function<void()> fn;
    bool lazy = false;
  };
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Task> tasks;
    size_t urgent = 0;        // tasks queued by post (not post_lazy)
    bool deep_sleep = false;  // idle for longer than that: post_lazy wakes the worker
    bool running = false;     // the worker is running a task
    bool borrowed = false;    // another thread runs a task in the worker's place
    bool stopping = false;
    // JAXMLX_WORKER_SPIN_US: how long an idle worker polls for the next urgent task before it
    // sleeps; `posted` counts urgent tasks, for the poll (it reads it without the lock).
    std::chrono::microseconds spin{0};
    std::atomic<uint64_t> posted{0};
    std::atomic<uint64_t> polls{0};  // idle spells that ended their poll
  };
  void enqueue(std::function<void()> task, bool lazy);
  static void loop(std::shared_ptr<Queue> queue);
  Status init_device();

  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  DeviceInfo info_;
  Thread thread_;  // with a 64 MiB stack (base/thread.h says why)
  std::thread::id thread_id_;
  // On MLX's CPU and CUDA: the worker's default stream, made with new_thread_unsafe_stream so
  // that another thread may use it in the worker's place (MLX keeps other streams' command
  // encoders per thread). None on Metal: runs stay on the worker.
  std::optional<mlx::core::Stream> shared_stream_;
  bool lend_ = true;  // JAXMLX_CALLER_RUNS
};

// Runs `fn`, turning an exception (MLX reports errors by throwing) into an INTERNAL status that
// names `what`.
Status guard(const char* what, const std::function<Status()>& fn);

}  // namespace jaxmlx::runtime
