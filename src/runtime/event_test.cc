#include "runtime/event.h"

#include <atomic>
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

}  // namespace
}  // namespace jaxmlx::runtime
