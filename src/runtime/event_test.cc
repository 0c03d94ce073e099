#include "runtime/event.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"

namespace jaxmlx::runtime {
namespace {

TEST(EventTest, CallbackRegisteredBeforeSetRunsOnSet) {
  Event e;
  int calls = 0;
  e.on_ready([&](const Status& st) {
    EXPECT_TRUE(st.ok());
    ++calls;
  });
  EXPECT_FALSE(e.is_ready());
  e.set();
  EXPECT_TRUE(e.is_ready());
  EXPECT_EQ(calls, 1);
  e.set(internal_error("late"));  // ignored: first status wins
  EXPECT_TRUE(e.status().ok());
  EXPECT_EQ(calls, 1);
}

TEST(EventTest, CallbackAfterSetRunsImmediatelyWithError) {
  Event e = Event::ready(invalid_argument("boom"));
  std::string seen;
  e.on_ready([&](const Status& st) { seen = st.to_string(); });
  EXPECT_EQ(seen, "INVALID_ARGUMENT: boom");
}

TEST(EventTest, AwaitBlocksUntilAnotherThreadSets) {
  Event e;
  std::atomic<bool> set{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    set = true;
    e.set(not_found("x"));
  });
  Status st = e.await();
  EXPECT_TRUE(set.load());
  EXPECT_EQ(st.code(), Code::kNotFound);
  t.join();
}

// The GIL cycle of event.h, with a mutex for the GIL: the test thread holds it and waits for a
// plugin thread (marked DeferEventCallbacks) that sets an event whose external callback takes
// it. While a WaitingForWorker lives, the callback moves to the notifier thread: the plugin
// thread is not held, and the callback runs once the "GIL" is released.
TEST(EventTest, ExternalCallbackLeavesAPluginThreadWhileSomeoneWaitsForTheWorker) {
  std::mutex gil;
  std::unique_lock<std::mutex> held(gil);
  Event e;
  std::atomic<bool> called{false};
  std::thread::id ran_on;
  e.on_ready(
      [&](const Status&) {
        std::lock_guard<std::mutex> lock(gil);
        ran_on = std::this_thread::get_id();
        called = true;
      },
      /*external=*/true);
  std::thread::id plugin_thread;
  {
    WaitingForWorker waiting;
    std::thread t([&] {
      DeferEventCallbacks defer;
      plugin_thread = std::this_thread::get_id();
      e.set();
    });
    t.join();  // a deadlock here without the notifier
  }
  EXPECT_TRUE(e.is_ready());
  EXPECT_FALSE(called);
  held.unlock();
  EXPECT_TRUE(e.await().ok());  // Await still implies the callbacks ran
  EXPECT_TRUE(called);
  EXPECT_NE(ran_on, plugin_thread);
}

// Nobody waiting: the external callback runs inline (the fast path wakes the caller directly),
// and a waiter arriving while it runs sees external_callbacks_running() and must not wait.
TEST(EventTest, ExternalCallbackRunsInlineAndAWaiterArrivingSeesIt) {
  std::mutex gil;
  std::unique_lock<std::mutex> held(gil);
  Event e;
  std::atomic<bool> entered{false};
  std::thread::id ran_on, plugin_thread;
  e.on_ready(
      [&](const Status&) {
        entered = true;
        std::lock_guard<std::mutex> lock(gil);
        ran_on = std::this_thread::get_id();
      },
      /*external=*/true);
  EXPECT_FALSE(external_callbacks_running());
  std::thread t([&] {
    DeferEventCallbacks defer;
    plugin_thread = std::this_thread::get_id();
    e.set();
  });
  while (!entered) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    WaitingForWorker waiting;
    EXPECT_TRUE(external_callbacks_running());  // so the waiter gives up waiting
  }
  held.unlock();
  t.join();
  EXPECT_EQ(ran_on, plugin_thread);
  EXPECT_FALSE(external_callbacks_running());
}

// The plugin's own callbacks (copies to host) always run inline, also while someone waits.
TEST(EventTest, InternalCallbacksRunInlineOnPluginThreads) {
  Event e;
  std::thread::id ran_on, plugin_thread;
  e.on_ready([&](const Status&) { ran_on = std::this_thread::get_id(); });
  WaitingForWorker waiting;
  std::thread t([&] {
    DeferEventCallbacks defer;
    plugin_thread = std::this_thread::get_id();
    e.set();
  });
  t.join();
  EXPECT_EQ(ran_on, plugin_thread);
}

}  // namespace
}  // namespace jaxmlx::runtime
