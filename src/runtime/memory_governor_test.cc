#include "runtime/memory_governor.h"

#include <cstdlib>
#include <new>
#include <stdexcept>

#include "gtest/gtest.h"
#include "runtime/device_worker.h"

namespace jaxmlx::runtime {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

size_t parse_ok(const char* text, size_t whole = 0) {
  StatusOr<size_t> v = parse_memory_size(text, whole);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().to_string();
  return v.ok() ? *v : 0;
}

void expect_bad(const char* text, const char* fragment, size_t whole = 16 * kGiB) {
  StatusOr<size_t> v = parse_memory_size(text, whole);
  ASSERT_FALSE(v.ok()) << text << " parsed as " << *v;
  EXPECT_EQ(v.status().code(), Code::kInvalidArgument);
  EXPECT_NE(v.status().message().find(fragment), std::string::npos) << v.status().message();
  EXPECT_NE(v.status().message().find(text), std::string::npos) << "names the text";
}

TEST(ParseMemorySize, PlainBytes) {
  EXPECT_EQ(parse_ok("1073741824"), kGiB);
  EXPECT_EQ(parse_ok("1"), 1u);
  EXPECT_EQ(parse_ok("  4096 "), 4096u);
  EXPECT_EQ(parse_ok("100B"), 100u);
}

TEST(ParseMemorySize, Suffixes) {
  EXPECT_EQ(parse_ok("8G"), 8 * kGiB);
  EXPECT_EQ(parse_ok("8g"), 8 * kGiB);
  EXPECT_EQ(parse_ok("8GB"), 8 * kGiB);
  EXPECT_EQ(parse_ok("8GiB"), 8 * kGiB);
  EXPECT_EQ(parse_ok("512M"), size_t{512} << 20);
  EXPECT_EQ(parse_ok("64k"), size_t{64} << 10);
  EXPECT_EQ(parse_ok("2T"), size_t{2} << 40);
  EXPECT_EQ(parse_ok("3 M"), size_t{3} << 20);
}

TEST(ParseMemorySize, FractionOfWhole) {
  EXPECT_EQ(parse_ok("0.5", 16 * kGiB), 8 * kGiB);
  EXPECT_EQ(parse_ok("0.25", 1000), 250u);
  EXPECT_EQ(parse_ok("1.0", 1000), 1000u);
  EXPECT_EQ(parse_ok(".5", 1000), 500u);
}

TEST(ParseMemorySize, Garbage) {
  expect_bad("", "empty");
  expect_bad("   ", "empty");
  expect_bad("lots", "not a number");
  expect_bad("-5", "not a number");
  expect_bad("8X", "unknown suffix");
  expect_bad("8GBs", "unknown suffix");
  expect_bad("0", "positive");
  expect_bad("0G", "positive");
  expect_bad("1.5", "(0, 1]");
  expect_bad("0.0", "(0, 1]");
  expect_bad("-0.5", "(0, 1]");
  expect_bad("0.5x", "not a number");
  expect_bad("0.5", "unknown", /*whole=*/0);
  expect_bad("99999999999999999999999", "too large");
  expect_bad("99999999999T", "too large");
}

TEST(ComputeMemoryLimits, DefaultsAreFractionsOfTheDevice) {
  MemoryLimits l = compute_memory_limits(nullptr, nullptr, 16 * kGiB);
  EXPECT_EQ(l.limit, 12 * kGiB);  // kDefaultLimitFraction = 0.75
  EXPECT_EQ(l.cache_limit, 6 * kGiB);  // kDefaultCacheFraction = 0.5 of the limit
}

TEST(ComputeMemoryLimits, EnvironmentOverrides) {
  MemoryLimits l = compute_memory_limits("4G", "1G", 16 * kGiB);
  EXPECT_EQ(l.limit, 4 * kGiB);
  EXPECT_EQ(l.cache_limit, 1 * kGiB);
  // A cache fraction is of the memory limit, and the cache never exceeds the limit.
  l = compute_memory_limits("0.5", "0.25", 16 * kGiB);
  EXPECT_EQ(l.limit, 8 * kGiB);
  EXPECT_EQ(l.cache_limit, 2 * kGiB);
  l = compute_memory_limits("1G", "8G", 16 * kGiB);
  EXPECT_EQ(l.cache_limit, 1 * kGiB);
  l = compute_memory_limits("1G", "0", 16 * kGiB);
  EXPECT_EQ(l.cache_limit, 0u);
}

TEST(ComputeMemoryLimits, GarbageFallsBackToDefaultWithAWarning) {
  std::string warning;
  MemoryLimits l = compute_memory_limits("plenty", "huge", 16 * kGiB, &warning);
  EXPECT_EQ(l.limit, 12 * kGiB);
  EXPECT_EQ(l.cache_limit, 6 * kGiB);
  EXPECT_NE(warning.find("JAXMLX_MEMORY_LIMIT ignored"), std::string::npos) << warning;
  EXPECT_NE(warning.find("\"plenty\""), std::string::npos) << warning;
  EXPECT_NE(warning.find("JAXMLX_CACHE_LIMIT ignored"), std::string::npos) << warning;
}

TEST(ComputeMemoryLimits, UnknownDeviceMemoryMeansNoLimit) {
  MemoryLimits l = compute_memory_limits(nullptr, nullptr, 0);
  EXPECT_EQ(l.limit, 0u);
  EXPECT_EQ(compute_memory_limits("2G", nullptr, 0).limit, 2 * kGiB);
}

TEST(AllocationFailure, RecognizesWhatAllocatorsThrow) {
  EXPECT_TRUE(is_allocation_failure(std::bad_alloc()));
  EXPECT_TRUE(is_allocation_failure(std::runtime_error("[malloc] Unable to allocate 8 bytes.")));
  EXPECT_TRUE(is_allocation_failure(std::runtime_error("[metal::malloc] Resource limit exceeded; "
                                                       "attempting to allocate 4 bytes")));
  EXPECT_TRUE(is_allocation_failure(std::runtime_error("CUDA error: out of memory")));
  EXPECT_FALSE(is_allocation_failure(std::runtime_error("[reshape] Cannot reshape array")));
  EXPECT_FALSE(is_allocation_failure(std::invalid_argument("allocate is a word here")));
}

TEST(CheckMemory, RefusesWhatDoesNotFitBesideLiveArraysNamingTheNumbers) {
  ::setenv("JAXMLX_MEMORY_LIMIT", "1M", 1);
  MemoryLimits l = configure_memory_governor(16 * kGiB);
  ::unsetenv("JAXMLX_MEMORY_LIMIT");
  ASSERT_EQ(l.limit, size_t{1} << 20);
  EXPECT_EQ(memory_limit(), size_t{1} << 20);
  EXPECT_TRUE(check_memory(4096, "small").ok());
  Status st = check_memory(size_t{2} << 20, "host-to-device transfer");
  ASSERT_EQ(st.code(), Code::kResourceExhausted);
  for (const char* part : {"host-to-device transfer", "requested 2.00 MiB (2097152 bytes)",
                           "live arrays", "cache", "limit 1.00 MiB (1048576 bytes)"})
    EXPECT_NE(st.message().find(part), std::string::npos) << part << " in " << st.message();
  // Adopted blocks count as live: 900 KiB held leaves no room for 200 KiB more.
  note_adopted(900 << 10);
  EXPECT_EQ(check_memory(200 << 10, "t").code(), Code::kResourceExhausted);
  note_released(900 << 10);
  EXPECT_TRUE(check_memory(200 << 10, "t").ok());
}

TEST(Guard, AllocationFailureIsResourceExhaustedNotAnAbort) {
  Status st = guard("execute", []() -> Status {
    throw std::runtime_error("[malloc] Unable to allocate 8 bytes.");
  });
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
  EXPECT_NE(st.message().find("[malloc] Unable to allocate"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("live arrays"), std::string::npos) << st.message();
  st = guard("execute", []() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
  st = guard("execute", []() -> Status { throw std::runtime_error("[reshape] bad shape"); });
  EXPECT_EQ(st.code(), Code::kInternal);
}

TEST(FormatBytes, ShowsUnitAndExactCount) {
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(64u << 20), "64.00 MiB (67108864 bytes)");
}

}  // namespace
}  // namespace jaxmlx::runtime
