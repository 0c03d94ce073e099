// Thread, TaskThread and set_this_thread_name.
#include "base/thread.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace jaxmlx {
namespace {

std::string this_thread_name() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST(TaskThreadTest, RunsTasksInOrderOnOneNamedThread) {
  auto* t = new TaskThread("jaxmlx-test");  // never destroyed, by contract
  std::vector<int> order;
  std::vector<std::thread::id> ids;
  std::promise<std::string> name;
  for (int i = 0; i < 100; ++i)
    t->post([&, i] {
      order.push_back(i);
      ids.push_back(std::this_thread::get_id());
    });
  t->post([&] { name.set_value(this_thread_name()); });
  EXPECT_EQ(name.get_future().get(), "jaxmlx-test");
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (const std::thread::id& id : ids) EXPECT_EQ(id, ids.front());
  EXPECT_NE(ids.front(), std::this_thread::get_id());
}

TEST(TaskThreadTest, DrainWaitsForWhatWasPostedAndGivesUpOnABlockedTask) {
  auto* t = new TaskThread("jaxmlx-test");
  std::atomic<bool> ran{false};
  t->post([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ran.store(true);
  });
  EXPECT_TRUE(t->drain_for(std::chrono::seconds(10)));
  EXPECT_TRUE(ran.load());
  // On its own thread a drain cannot wait for itself.
  std::promise<bool> inside;
  t->post([&] { inside.set_value(t->drain_for(std::chrono::seconds(10))); });
  EXPECT_TRUE(inside.get_future().get());
  // A task that never ends: the drain returns false when its budget is spent.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  t->post([released] { released.wait(); });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(t->drain_for(std::chrono::milliseconds(100)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  release.set_value();
  EXPECT_TRUE(t->drain_for(std::chrono::seconds(10)));
}

TEST(ThreadNameTest, LongNamesAreCutToFifteenCharacters) {
  std::string seen;
  Thread t(size_t{1} << 20, [&] {
    set_this_thread_name("a-name-longer-than-fifteen");
    seen = this_thread_name();
  });
  t.join();
  EXPECT_EQ(seen, "a-name-longer-t");
}

}  // namespace
}  // namespace jaxmlx
