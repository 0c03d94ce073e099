#include "runtime/cuda_exit_order.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <dirent.h>
#endif

#include "mlx/scheduler.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

// Long enough for a callback thread on a loaded machine to be scheduled and end; a thread that
// does not end in it (one stuck in a task) is left to exit()'s _exit.
constexpr std::chrono::milliseconds kExitBudget{200};

std::atomic<pid_t> g_pid{0};           // the process that made the streams
std::atomic<int> g_streams{0};         // CUDA shared streams made (one callback thread each)
std::atomic<int> g_threads_before{-1};  // counted just before the encoder map's destructor

}  // namespace

int count_process_threads() {
#if defined(__linux__)
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
#else
  return -1;
#endif
}

bool wait_for_thread_count_at_most(int n, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    int count = count_process_threads();
    if (count < 0) return false;
    if (count <= n) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

mx::Stream new_shared_stream(mx::Device dev, bool cuda) {
  if (!cuda) return mx::new_thread_unsafe_stream(dev);
  static std::once_flag before_map;
  std::call_once(before_map, [] {
    g_pid.store(getpid());
    // MLX's scheduler starts the CUDA runtime, its event pool and handle caches (gpu::init):
    // made now, they are destroyed after the handler below.
    (void)mx::scheduler::scheduler();
    // Runs after the encoder map's destructor (registered after this, by the stream's maker).
    std::atexit([] {
      if (getpid() != g_pid.load()) return;
      int before = g_threads_before.load();
      if (before < 0) return;
      (void)wait_for_thread_count_at_most(before - g_streams.load(), kExitBudget);
    });
  });
  mx::Stream stream = mx::new_thread_unsafe_stream(dev);
  g_streams.fetch_add(1);
  static std::once_flag after_map;
  std::call_once(after_map, [] {
    // Runs before the encoder map's destructor, so the count includes the callback threads.
    std::atexit([] {
      if (getpid() == g_pid.load()) g_threads_before.store(count_process_threads());
    });
  });
  return stream;
}

}  // namespace jaxmlx::runtime
