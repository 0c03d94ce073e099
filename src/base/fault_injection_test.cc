// The JAXMLX_FAULT grammar and counting (base/fault_injection.h).
#include "base/fault_injection.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace jaxmlx::fault {
namespace {

class FaultInjection : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(install("").ok()); }

  // Which of the next `n` events at `p` fire, as a string of 0/1.
  static std::string pattern(Point p, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += fired(p) ? '1' : '0';
    return s;
  }
};

TEST_F(FaultInjection, NothingFiresWithoutASpec) {
  EXPECT_EQ(current(), "");
  EXPECT_EQ(pattern(Point::kExecute, 5), "00000");
  EXPECT_EQ(pattern(Point::kAlloc, 5), "00000");
  EXPECT_NO_THROW(on_run());
}

TEST_F(FaultInjection, TheNthEventFailsOnce) {
  ASSERT_TRUE(install("execute:3").ok());
  EXPECT_EQ(current(), "execute:3");
  EXPECT_EQ(pattern(Point::kExecute, 6), "001000");
  EXPECT_EQ(pattern(Point::kAlloc, 4), "0000");  // other points are not affected
}

TEST_F(FaultInjection, PlusFailsThatEventAndEveryLaterOne) {
  ASSERT_TRUE(install("callback:2+").ok());
  EXPECT_EQ(pattern(Point::kCallback, 5), "01111");
  ASSERT_TRUE(install("kernel:3+").ok());
  EXPECT_EQ(pattern(Point::kKernel, 4), "0011");
}

TEST_F(FaultInjection, SeveralEntriesCountOnTheirOwn) {
  ASSERT_TRUE(install(" alloc:1 , execute:2,execute:4 ").ok());
  EXPECT_EQ(pattern(Point::kAlloc, 3), "100");
  EXPECT_EQ(pattern(Point::kExecute, 5), "01010");
}

TEST_F(FaultInjection, InstallingRestartsTheCounts) {
  ASSERT_TRUE(install("execute:2").ok());
  EXPECT_EQ(pattern(Point::kExecute, 1), "0");
  ASSERT_TRUE(install("execute:2").ok());
  EXPECT_EQ(pattern(Point::kExecute, 3), "010");
  ASSERT_TRUE(install("").ok());
  EXPECT_EQ(pattern(Point::kExecute, 3), "000");
}

TEST_F(FaultInjection, TheMessageNamesSpecPointAndCount) {
  ASSERT_TRUE(install("alloc:2").ok());
  EXPECT_FALSE(fired(Point::kAlloc));
  std::optional<std::string> why = fired(Point::kAlloc);
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "fault injected by JAXMLX_FAULT=alloc:2 (alloc #2)");
}

TEST_F(FaultInjection, BadSpecsAreRefusedAndKeepThePreviousOne) {
  ASSERT_TRUE(install("execute:1").ok());
  for (const char* bad : {"execute", "execute:", "execute:0", "execute:-1", "execute:x",
                          "execute:2++", "exec:1", "alloc:1,bogus:2", ":3"}) {
    Status st = install(bad);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find(bad), std::string::npos) << st.message();
  }
  EXPECT_EQ(current(), "execute:1");
  EXPECT_EQ(pattern(Point::kExecute, 2), "10");
}

TEST_F(FaultInjection, OnRunThrowsWhatMlxWouldThrow) {
  ASSERT_TRUE(install("alloc:1,execute:2").ok());
  try {
    on_run();  // alloc #1 fires first; execute #1 is not counted then
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("[malloc] Unable to allocate"), std::string::npos);
  }
  EXPECT_NO_THROW(on_run());  // alloc #2, execute #1
  try {
    on_run();  // alloc #3, execute #2
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("execute #2"), std::string::npos) << e.what();
  }
}

TEST_F(FaultInjection, TheCExportReportsErrors) {
  char error[256] = {};
  EXPECT_EQ(jaxmlx_set_fault("callback:1", error, sizeof(error)), 0);
  EXPECT_EQ(current(), "callback:1");
  EXPECT_EQ(jaxmlx_set_fault("nope", error, sizeof(error)), 1);
  EXPECT_NE(std::string(error).find("nope"), std::string::npos) << error;
  char tiny[8];
  EXPECT_EQ(jaxmlx_set_fault("nope", tiny, sizeof(tiny)), 1);
  EXPECT_EQ(std::string(tiny).size(), 7u);  // truncated and terminated
  EXPECT_EQ(jaxmlx_set_fault(nullptr, nullptr, 0), 0);
  EXPECT_EQ(current(), "");
}

TEST_F(FaultInjection, EnvironmentSpecIsInstalled) {
  setenv("JAXMLX_FAULT", "execute:1+", 1);
  EXPECT_TRUE(install_from_env().ok());
  unsetenv("JAXMLX_FAULT");
  EXPECT_EQ(current(), "execute:1+");
}

TEST_F(FaultInjection, CountsAreExactUnderConcurrency) {
  ASSERT_TRUE(install("execute:1000").ok());
  std::atomic<int> fires{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) fires += fired(Point::kExecute) ? 1 : 0;
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(fires.load(), 1);
}

}  // namespace
}  // namespace jaxmlx::fault
