#include "runtime/cuda_exit_order.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace jaxmlx::runtime {
namespace {

using std::chrono::milliseconds;

// Where /proc/self/task is (Linux: MLX's CUDA backend); elsewhere the count is -1.
#define SKIP_WITHOUT_THREAD_COUNT() \
  if (count_process_threads() < 0) GTEST_SKIP() << "no /proc/self/task here"

TEST(CudaExitOrderTest, CountsThisProcesssThreads) {
  SKIP_WITHOUT_THREAD_COUNT();
  int before = count_process_threads();
  ASSERT_GT(before, 0);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread t([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  });
  EXPECT_EQ(count_process_threads(), before + 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  t.join();
  EXPECT_TRUE(wait_for_thread_count_at_most(before, milliseconds(1000)));
}

TEST(CudaExitOrderTest, WaitsForADetachedThreadToEnd) {
  SKIP_WITHOUT_THREAD_COUNT();
  int before = count_process_threads();
  std::atomic<bool> ended{false};
  std::thread([&ended] {
    std::this_thread::sleep_for(milliseconds(30));
    ended.store(true);
  }).detach();
  EXPECT_TRUE(wait_for_thread_count_at_most(before, milliseconds(5000)));
  EXPECT_TRUE(ended.load());
}

TEST(CudaExitOrderTest, GivesUpAfterItsBudget) {
  SKIP_WITHOUT_THREAD_COUNT();
  int n = count_process_threads();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(wait_for_thread_count_at_most(n - 1, milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(20));
}

// The exit handlers, on MLX's CPU with the CUDA path forced: a thread stopped just before the
// encoder map's destructor (as MLX's callback thread is) stands for the callback thread. The
// handler registered first (standing for the CUDA runtime's teardown) must run after it ended.
std::atomic<bool> g_callback_thread_ended{false};
std::mutex g_mu;
std::condition_variable g_cv;
bool g_stop = false;

TEST(CudaExitOrderTest, ExitWaitsForTheStoppedCallbackThread) {
  SKIP_WITHOUT_THREAD_COUNT();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::atexit([] { std::_Exit(g_callback_thread_ended.load() ? 0 : 3); });
        (void)new_shared_stream(mlx::core::Device(mlx::core::Device::cpu, 0), /*cuda=*/true);
        std::thread([] {
          std::unique_lock<std::mutex> lock(g_mu);
          g_cv.wait(lock, [] { return g_stop; });
          lock.unlock();
          std::this_thread::sleep_for(milliseconds(30));  // its CUDA objects' destruction
          g_callback_thread_ended.store(true);
        }).detach();
        // Stands for the map's destructor; registered after the stream, so it runs before the
        // handler that counts the threads, as the exit drain does.
        std::atexit([] {
          {
            std::lock_guard<std::mutex> lock(g_mu);
            g_stop = true;
          }
          g_cv.notify_all();
        });
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace jaxmlx::runtime
