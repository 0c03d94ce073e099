// Reader robustness: truncated and corrupted artifacts give a clean Status error, never a crash.
//
// Every prefix of a small valid artifact, and a few thousand seeded random corruptions of the
// testdata artifacts, go through read_portable_artifact (and the printer when they parse). Run it
// under the sanitizer build (-DJAXMLX_SANITIZE=address,undefined) to catch what a plain build
// would not notice. The libFuzzer targets next to it explore the same space without a seed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "vhlo/read.h"

namespace jaxmlx {
namespace {

std::filesystem::path testdata() {
  const char* env = std::getenv("JAXMLX_TESTDATA");
  return env ? env : "../shared/testdata";
}

std::vector<uint8_t> load(const std::string& rel) {
  std::ifstream in(testdata() / rel, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Parses, verifies and, on success, prints: all three must be total functions of the bytes.
Status parse(std::span<const uint8_t> bytes) {
  auto module = vhlo::read_portable_artifact(bytes, nullptr);
  if (!module.ok()) return module.status();
  RETURN_IF_ERROR(ir::verify(*module));
  ir::PrintOptions opts;
  opts.locations = true;
  (void)ir::print_module(*module, opts);
  return Status();
}

// A clean error: a code a reader may use, and a message that says something.
void expect_clean_error(const Status& s, const std::string& what) {
  ASSERT_FALSE(s.ok()) << what;
  EXPECT_NE(s.code(), Code::kUnknown) << what << ": " << s.to_string();
  EXPECT_NE(s.code(), Code::kInternal) << what << ": " << s.to_string();
  EXPECT_FALSE(s.message().empty()) << what;
}

TEST(ReaderRobustness, ValidArtifactsParse) {
  for (const char* f : {"jax-0.11.2/mlp_current.mlirbc", "jax-0.11.2/mlp_minimum.mlirbc"}) {
    auto data = load(f);
    ASSERT_FALSE(data.empty()) << f;
    Status s = parse(data);
    EXPECT_TRUE(s.ok()) << f << ": " << s.to_string();
  }
}

// A prefix can only parse if it ends exactly where optional trailing sections begin; the IR
// section is not optional, so at most the last few section boundaries may.
TEST(ReaderRobustness, EveryPrefixFailsCleanly) {
  for (const char* f : {"jax-0.11.2/mlp_current.mlirbc", "jax-0.11.2/mlp_minimum.mlirbc"}) {
    auto data = load(f);
    ASSERT_FALSE(data.empty()) << f;
    int parsed = 0;
    for (size_t n = 0; n < data.size(); ++n) {
      Status s = parse(std::span(data.data(), n));
      if (s.ok()) {
        ++parsed;
        continue;
      }
      expect_clean_error(s, std::string(f) + " prefix " + std::to_string(n));
    }
    EXPECT_LE(parsed, 3) << f << ": too many truncated prefixes parse as valid";
  }
}

// Sampled prefixes of the large all-ops module, across bytecode versions.
TEST(ReaderRobustness, SampledPrefixesOfLargeModules) {
  for (const char* f : {"vhlo/stablehlo_legalize_to_vhlo.0_9_0.mlir.bc",
                        "vhlo/stablehlo_legalize_to_vhlo.1_0_0.mlir.bc"}) {
    auto data = load(f);
    ASSERT_FALSE(data.empty()) << f;
    for (size_t n = 0; n < data.size(); n += 97) {
      Status s = parse(std::span(data.data(), n));
      if (!s.ok()) expect_clean_error(s, std::string(f) + " prefix " + std::to_string(n));
    }
  }
}

// Seeded random corruption: 1-4 byte changes (bit flips, random bytes, 0x00/0xFF) per trial.
TEST(ReaderRobustness, RandomByteFlipsFailCleanlyOrParse) {
  const char* files[] = {
      "jax-0.11.2/mlp_current.mlirbc",
      "jax-0.11.2/mlp_minimum.mlirbc",
      "vhlo/stablehlo_legalize_to_vhlo.0_9_0.mlir.bc",
      "vhlo/stablehlo_legalize_to_vhlo.0_14_0.mlir.bc",
      "vhlo/stablehlo_legalize_to_vhlo.1_0_0.mlir.bc",
      "vhlo/stablehlo_legalize_to_vhlo.1_16_0.mlir.bc",
  };
  constexpr int kTrialsPerFile = 600;
  std::mt19937_64 rng(20261130);
  int ok = 0, failed = 0;
  for (const char* f : files) {
    const auto original = load(f);
    ASSERT_FALSE(original.empty()) << f;
    for (int t = 0; t < kTrialsPerFile; ++t) {
      auto data = original;
      const int edits = 1 + static_cast<int>(rng() % 4);
      std::string what = std::string(f) + " trial " + std::to_string(t) + ":";
      for (int e = 0; e < edits; ++e) {
        const size_t pos = rng() % data.size();
        switch (rng() % 4) {
          case 0: data[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
          case 1: data[pos] = static_cast<uint8_t>(rng()); break;
          case 2: data[pos] = 0x00; break;
          default: data[pos] = 0xFF; break;
        }
        what += " @" + std::to_string(pos) + "=" + std::to_string(data[pos]);
      }
      Status s = parse(data);
      if (s.ok()) {
        ++ok;
      } else {
        ++failed;
        expect_clean_error(s, what);
      }
      if (HasFatalFailure()) return;
    }
  }
  // Most corruptions must be noticed; some land in strings or constants and stay valid.
  EXPECT_GT(failed, 0);
  std::printf("random flips: %d parsed, %d clean errors\n", ok, failed);
}

}  // namespace
}  // namespace jaxmlx
