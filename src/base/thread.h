// Thread: a thread whose stack size we choose.
//
// std::thread takes the platform's default stack: 8 MiB on Linux (RLIMIT_STACK), 512 KiB on macOS
// for every thread but the main one. MLX's mx::compile walks a graph recursively (compile_dfs:
// one frame per node along the longest path), and the graph of a program whose loops were
// unrolled (passes/unroll.h) is thousands of nodes deep: the device worker, which traces every
// program, gets a stack as deep as Linux's main thread has, on every platform (pthreads: the
// same code on Linux and macOS). Same contract as std::thread: join or detach before destruction.
//
// Also here: TaskThread (an ordered task queue on a thread of its own) and thread names.
#pragma once

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace jaxmlx {

class Thread {
 public:
  Thread() = default;
  // Runs fn on a new thread with a stack of `stack_bytes`; throws std::system_error when the
  // thread cannot be made.
  Thread(size_t stack_bytes, std::function<void()> fn);
  Thread(Thread&& o) noexcept;
  Thread& operator=(Thread&& o) noexcept;
  Thread(const Thread&) = delete;
  Thread& operator=(const Thread&) = delete;
  ~Thread();  // std::terminate when still joinable, as std::thread

  bool joinable() const { return joinable_; }
  void join();
  void detach();
  std::thread::id get_id() const { return id_; }

 private:
  pthread_t handle_{};
  bool joinable_ = false;
  std::thread::id id_;
};

// Posts, through `post`, a task that only marks its turn, and waits up to `budget` for it to
// run: on a queue that runs its tasks in order, everything posted before has run then. False
// when it did not (a task blocked).
bool wait_for_turn(const std::function<void(std::function<void()>)>& post,
                   std::chrono::milliseconds budget);

// A named thread that runs posted tasks one at a time, in the order they were posted. Never
// destroyed (make one with new and keep it): its thread may be blocked inside a task -- waiting
// for Python's GIL, or for a GPU -- when the process exits, and nothing may join it then.
class TaskThread {
 public:
  explicit TaskThread(const char* name);
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  // Thread-safe; never blocks on the tasks.
  void post(std::function<void()> task);
  // Waits up to `budget` for the tasks posted so far to finish; false when they did not (a task
  // blocked). True at once on the thread itself, which cannot wait for its own queue.
  bool drain_for(std::chrono::milliseconds budget);

 private:
  ~TaskThread() = default;  // never called (see above)
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::thread::id id_;
};

// Names the calling thread for profilers and debuggers (perf, gdb, top -H, Instruments); the
// name is cut to 15 characters, Linux's limit. Best effort: nothing happens where it fails.
void set_this_thread_name(const char* name);

}  // namespace jaxmlx
