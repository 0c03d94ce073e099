// DeviceWorker::run_here_if_idle: a task run on the calling thread in the worker's place, and
// the worker's queue around it (runs in order, nothing concurrent, nothing lost).
#include "runtime/device_worker.h"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "mlx/mlx.h"
#include "runtime/event.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

// The worker's default MLX stream, as the worker sees it.
mx::Stream worker_stream(DeviceWorker& w) {
  std::optional<mx::Stream> s;
  EXPECT_TRUE(w.run_sync([&] {
                 s = mx::default_stream(mx::default_device());
                 return Status();
               }).ok());
  return *s;
}

// Waits until the worker has run everything queued so far.
void drain(DeviceWorker& w) { ASSERT_TRUE(w.run_sync([] { return Status(); }).ok()); }

// Runs `task` in the worker's place once the worker is idle: a task that just set a promise
// (drain) may not have returned yet.
bool run_here_soon(DeviceWorker& w, std::function<void()>& task) {
  for (int i = 0; i < 2000; ++i) {
    if (w.run_here_if_idle(task)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Keeps the worker inside a task from construction until release().
class BusyWorker {
 public:
  explicit BusyWorker(DeviceWorker& w) {
    w.post([this, released = released_] {
      started_ = true;
      released.wait();
    });
    while (!started_) std::this_thread::yield();
  }
  void release() { release_.set_value(); }

 private:
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::atomic<bool> started_{false};
};

class DeviceWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("JAXMLX_CALLER_RUNS");
    worker_ = std::make_shared<DeviceWorker>();
    if (worker_->info().is_gpu) GTEST_SKIP() << "runs stay on the worker on GPUs";
    drain(*worker_);
  }
  std::shared_ptr<DeviceWorker> worker_;
};

TEST_F(DeviceWorkerTest, IdleWorkerLetsTheCallerRunWithItsStream) {
  const mx::Stream theirs = worker_stream(*worker_);
  const mx::Stream mine = mx::default_stream(mx::default_device());
  ASSERT_NE(mine, theirs);
  const std::thread::id me = std::this_thread::get_id();
  bool ran = false;
  float sum = 0;
  std::function<void()> task = [&] {
    ran = true;
    EXPECT_EQ(std::this_thread::get_id(), me);
    EXPECT_TRUE(worker_->on_worker_thread());
    EXPECT_EQ(mx::default_stream(mx::default_device()), theirs);
    mx::array a = mx::sum(mx::arange(5.0f) + 1.0f);
    mx::eval(a);
    sum = a.item<float>();
  };
  ASSERT_TRUE(run_here_soon(*worker_, task));
  EXPECT_TRUE(ran);
  EXPECT_FALSE(task);  // consumed
  EXPECT_EQ(sum, 15.0f);
  EXPECT_FALSE(worker_->on_worker_thread());
  EXPECT_EQ(mx::default_stream(mx::default_device()), mine);  // the caller's stream is back
}

TEST_F(DeviceWorkerTest, AThreadWithoutAStreamGetsItsOwnAfterwards) {
  const mx::Stream theirs = worker_stream(*worker_);
  std::thread t([&] {
    ASSERT_FALSE(mx::peek_default_stream(mx::default_device()).has_value());
    std::function<void()> task = [] {};
    ASSERT_TRUE(run_here_soon(*worker_, task));
    std::optional<mx::Stream> own = mx::peek_default_stream(mx::default_device());
    ASSERT_TRUE(own.has_value());
    EXPECT_NE(*own, theirs);  // MLX work of this thread never lands on the worker's stream
  });
  t.join();
}

TEST_F(DeviceWorkerTest, BusyWorkerKeepsTheTask) {
  BusyWorker busy(*worker_);
  int runs = 0;
  std::function<void()> task = [&] { ++runs; };
  EXPECT_FALSE(worker_->run_here_if_idle(task));  // running a task
  EXPECT_TRUE(task);
  EXPECT_EQ(runs, 0);
  busy.release();
  EXPECT_TRUE(run_here_soon(*worker_, task));
  EXPECT_EQ(runs, 1);
}

TEST_F(DeviceWorkerTest, QueuedUrgentWorkKeepsTheTask) {
  BusyWorker busy(*worker_);
  std::vector<std::string> order;
  std::mutex mu;
  worker_->post([&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back("queued");
  });
  busy.release();
  // Either the queued task is still waiting (then the caller must not overtake it) or it ran.
  std::function<void()> task = [&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back("caller");
  };
  if (!worker_->run_here_if_idle(task)) worker_->post(std::move(task));
  drain(*worker_);
  EXPECT_EQ(order, (std::vector<std::string>{"queued", "caller"}));
}

TEST_F(DeviceWorkerTest, LazyTasksQueuedBeforeRunFirst) {
  std::vector<std::string> order;
  std::mutex mu;
  for (int i = 0; i < 3; ++i) {
    worker_->post_lazy([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back("lazy" + std::to_string(i));
    });
  }
  std::function<void()> task = [&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back("caller");
  };
  if (!worker_->run_here_if_idle(task)) worker_->post(std::move(task));
  drain(*worker_);
  EXPECT_EQ(order, (std::vector<std::string>{"lazy0", "lazy1", "lazy2", "caller"}));
}

TEST_F(DeviceWorkerTest, WorkerStartsNothingWhileTheCallerRuns) {
  std::atomic<bool> inside{false};
  std::atomic<bool> overlapped{false};
  std::atomic<int> posted_runs{0};
  std::function<void()> task = [&] {
    inside = true;
    // Another thread posts meanwhile: the worker wakes for it, and must wait for us.
    std::thread other([&] {
      worker_->post([&] {
        overlapped = overlapped || inside.load();
        ++posted_runs;
      });
      worker_->post_lazy([&] {
        overlapped = overlapped || inside.load();
        ++posted_runs;
      });
    });
    other.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    // Posts from the thread in the worker's place run at once, as on the worker.
    bool inline_ran = false;
    worker_->post([&] { inline_ran = true; });
    EXPECT_TRUE(inline_ran);
    // And it does not lend itself twice.
    std::function<void()> nested = [] {};
    EXPECT_FALSE(worker_->run_here_if_idle(nested));
    inside = false;
  };
  ASSERT_TRUE(run_here_soon(*worker_, task));
  drain(*worker_);
  EXPECT_EQ(posted_runs.load(), 2);
  EXPECT_FALSE(overlapped.load());
}

TEST_F(DeviceWorkerTest, ManyThreadsRunEachTaskOnceAndNeverTogether) {
  std::atomic<int> active{0}, most{0}, runs{0}, on_caller{0};
  auto body = [&] {
    int now = ++active;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    mx::eval(mx::array(1.0f) + 1.0f);
    --active;
    ++runs;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        // Most run here (waiting for the worker to be idle), some are posted (urgent or lazy).
        std::function<void()> task = body;
        if (i % 4 != 0) {
          while (!worker_->run_here_if_idle(task)) std::this_thread::yield();
          ++on_caller;
        } else if (i % 8 == 0) {
          worker_->post_lazy(std::move(task));
        } else {
          worker_->post(std::move(task));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  drain(*worker_);
  EXPECT_EQ(runs.load(), 800);
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(on_caller.load(), 600);
}

// A jaxlib callback running on one of our threads may wait for Python's GIL, which the caller
// may hold: the caller must not then do work that can wait for that thread.
TEST_F(DeviceWorkerTest, NotWhileAnExternalCallbackRuns) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> in_callback{false};
  Event e;
  e.on_ready(
      [&, released](const Status&) {
        in_callback = true;
        released.wait();
      },
      /*external=*/true);
  std::thread notifier([&] {
    DeferEventCallbacks defer;  // as MLX's stream thread setting a run's outputs ready
    e.set();
  });
  while (!in_callback) std::this_thread::yield();
  std::function<void()> task = [] {};
  EXPECT_FALSE(worker_->run_here_if_idle(task));
  release.set_value();
  notifier.join();
  EXPECT_TRUE(run_here_soon(*worker_, task));
}

TEST(DeviceWorkerEnvTest, CallerRunsOff) {
  setenv("JAXMLX_CALLER_RUNS", "0", 1);
  auto worker = std::make_shared<DeviceWorker>();
  unsetenv("JAXMLX_CALLER_RUNS");
  drain(*worker);
  int runs = 0;
  std::function<void()> task = [&] { ++runs; };
  EXPECT_FALSE(worker->run_here_if_idle(task));
  EXPECT_EQ(runs, 0);
}

// CPU time of the worker's thread so far, read on it.
std::chrono::nanoseconds worker_cpu_time(DeviceWorker& w) {
  timespec ts{};
  EXPECT_TRUE(w.run_sync([&] {
                 clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
                 return Status();
               }).ok());
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// JAXMLX_WORKER_SPIN_US: an idle worker polls for the next task for that long, then sleeps.
TEST(DeviceWorkerEnvTest, AnIdleWorkerPollsThenSleeps) {
  setenv("JAXMLX_WORKER_SPIN_US", "100000", 1);  // 100 ms
  auto worker = std::make_shared<DeviceWorker>();
  unsetenv("JAXMLX_WORKER_SPIN_US");
  drain(*worker);
  const uint64_t polls = worker->idle_polls();
  // After its last task the worker polls; the poll ends (at 100 ms) whatever the load.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (worker->idle_polls() == polls && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GT(worker->idle_polls(), polls);
  // Then it sleeps: almost none of its core's time while idle.
  const auto before = worker_cpu_time(*worker);  // a task: it polls again after this one
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto spent = worker_cpu_time(*worker) - before;
  EXPECT_LT(spent, std::chrono::milliseconds(250));
  // Tasks posted from several threads while it polls all run.
  std::atomic<int> runs{0};
  std::vector<std::thread> posters;
  for (int i = 0; i < 4; ++i)
    posters.emplace_back([&] {
      for (int j = 0; j < 50; ++j) {
        ASSERT_TRUE(worker->run_sync([&] {
                            ++runs;
                            return Status();
                          }).ok());
      }
    });
  for (std::thread& t : posters) t.join();
  EXPECT_EQ(runs.load(), 200);
}

// Without the variable the worker never polls.
TEST(DeviceWorkerEnvTest, AWorkerSleepsAtOnceByDefault) {
  auto worker = std::make_shared<DeviceWorker>();
  drain(*worker);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(worker->idle_polls(), 0u);
}

TEST(DeviceWorkerEnvTest, APollingWorkerStopsAtOnce) {
  setenv("JAXMLX_WORKER_SPIN_US", "1000000", 1);  // 1 s, the most it takes
  auto worker = std::make_shared<DeviceWorker>();
  unsetenv("JAXMLX_WORKER_SPIN_US");
  drain(*worker);  // now polling
  const auto t0 = std::chrono::steady_clock::now();
  worker.reset();  // joins the thread
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
}

// Profilers (perf, top -H) and debuggers tell the worker by its name.
TEST(DeviceWorkerNameTest, TheWorkerThreadIsNamed) {
  auto worker = std::make_shared<DeviceWorker>();
  char name[16] = {};
  ASSERT_TRUE(worker->run_sync([&] {
                       pthread_getname_np(pthread_self(), name, sizeof(name));
                       return Status();
                     }).ok());
  EXPECT_STREQ(name, "jaxmlx-worker");
}

// The exit drain (DeviceWorker::drain_at_exit_before_mlx). Each case runs in a process of its
// own (a death test re-executing this binary), which calls exit() with work still queued.
std::atomic<bool> g_lazy_ran{false};

// A lazy free posted just before exit() would wait 2 ms (the worker ran something just now)
// and run while exit() destroys MLX's statics. With the drain it has run before the handlers
// registered ahead of MLX's statics -- here one registered before the worker existed.
TEST(DeviceWorkerExitTest, QueuedWorkRunsBeforeMlxIsDestroyed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::atexit([] { std::_Exit(g_lazy_ran.load() ? 0 : 3); });
        std::shared_ptr<DeviceWorker> worker = DeviceWorker::shared();
        drain(*worker);
        worker->post_lazy([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          g_lazy_ran.store(true);
        });
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A worker that never finishes its task (one waiting for a finalized Python's GIL) delays the
// exit by its budget, a second, and is left alone: the process still exits, with its code.
TEST(DeviceWorkerExitTest, ABlockedWorkerDoesNotHangTheExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EXIT(
      {
        std::shared_ptr<DeviceWorker> worker = DeviceWorker::shared();
        worker->post([] {
          std::promise<void> never;
          never.get_future().wait();
        });
        std::exit(7);
      },
      ::testing::ExitedWithCode(7), "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

}  // namespace
}  // namespace jaxmlx::runtime
