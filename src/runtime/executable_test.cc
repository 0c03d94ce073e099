// Executable on a real jax program (testdata mlp: dot_general, tanh, reduce, softmax), checked
// against a host reference. Skipped when the test data or a lowering rule is missing.
#include "runtime/executable.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "mlx/mlx.h"
#include "vhlo/read.h"

namespace jaxmlx::runtime {
namespace {

std::shared_ptr<const std::vector<uint8_t>> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  return std::make_shared<const std::vector<uint8_t>>(std::istreambuf_iterator<char>(in),
                                                      std::istreambuf_iterator<char>());
}

Storage f32() { return Storage{mlx::core::float32, 4, 0}; }

std::shared_ptr<Buffer> upload(DeviceWorker& w, const std::vector<float>& v,
                               std::vector<int64_t> dims) {
  auto b = Buffer::from_host(w, 0, std::move(dims), f32(), HostView{v.data(), {}}, true, Event());
  EXPECT_TRUE(b.ok());
  return *b;
}

std::vector<float> download(Buffer& b) {
  std::vector<float> out(b.num_elements());
  auto ev = b.to_host(out.data(), out.size() * 4, {});
  EXPECT_TRUE(ev.ok());
  EXPECT_TRUE(ev->await().ok()) << ev->await().to_string();
  return out;
}

class ExecutableMlp : public ::testing::TestWithParam<bool> {};

TEST_P(ExecutableMlp, RunsTwice) {
  setenv("JAXMLX_COMPILE", GetParam() ? "1" : "0", 1);
  const char* dir = std::getenv("JAXMLX_TESTDATA");
  if (!dir) GTEST_SKIP() << "JAXMLX_TESTDATA is not set";
  auto bytes = read_file(std::string(dir) + "/jax-0.11.2/mlp_current.mlirbc");
  if (!bytes) GTEST_SKIP() << "mlp_current.mlirbc missing";
  auto module = vhlo::read_portable_artifact(bytes);
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  auto worker = std::make_shared<DeviceWorker>();
  auto exe = Executable::compile(worker, std::move(*module));
  if (!exe.ok() && exe.status().code() == Code::kUnimplemented)
    GTEST_SKIP() << exe.status().to_string();
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  ASSERT_EQ((*exe)->inputs().size(), 2u);
  ASSERT_EQ((*exe)->outputs().size(), 2u);
  EXPECT_EQ((*exe)->name(), "jit_f");
  EXPECT_FALSE((*exe)->fingerprint().empty());

  std::vector<float> x(32), w(128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.17f * i) * 0.5f;
  // Host reference: t = tanh(x @ w); sum(t*t); softmax(t, axis=1).
  std::vector<double> t(64);
  double ss = 0;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 16; ++c) {
      double acc = 0;
      for (int k = 0; k < 8; ++k) acc += double(x[r * 8 + k]) * w[k * 16 + c];
      t[r * 16 + c] = std::tanh(acc);
      ss += t[r * 16 + c] * t[r * 16 + c];
    }
  for (int run = 0; run < 2; ++run) {  // the second run replays the compiled graph
    auto xb = upload(*worker, x, {4, 8});
    auto wb = upload(*worker, w, {8, 16});
    auto o0 = Buffer::pending(*worker, 0, {}, f32());
    auto o1 = Buffer::pending(*worker, 0, {4, 16}, f32());
    Event done;
    (*exe)->execute({xb, wb}, {o0, o1}, done);
    ASSERT_TRUE(done.await().ok()) << done.await().to_string();
    EXPECT_NEAR(download(*o0)[0], ss, 1e-4);
    std::vector<float> sm = download(*o1);
    for (int r = 0; r < 4; ++r) {
      double mx = -1e30, den = 0;
      for (int c = 0; c < 16; ++c) mx = std::max(mx, t[r * 16 + c]);
      for (int c = 0; c < 16; ++c) den += std::exp(t[r * 16 + c] - mx);
      for (int c = 0; c < 16; ++c)
        EXPECT_NEAR(sm[r * 16 + c], std::exp(t[r * 16 + c] - mx) / den, 1e-5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CompiledAndEager, ExecutableMlp, ::testing::Bool());

TEST(Executable, MissingInputFailsEveryOutput) {
  const char* dir = std::getenv("JAXMLX_TESTDATA");
  if (!dir) GTEST_SKIP() << "JAXMLX_TESTDATA is not set";
  auto bytes = read_file(std::string(dir) + "/jax-0.11.2/mlp_current.mlirbc");
  if (!bytes) GTEST_SKIP() << "mlp_current.mlirbc missing";
  auto module = vhlo::read_portable_artifact(bytes);
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  auto worker = std::make_shared<DeviceWorker>();
  auto exe = Executable::compile(worker, std::move(*module));
  if (!exe.ok()) GTEST_SKIP() << exe.status().to_string();
  auto xb = Buffer::pending(*worker, 0, {4, 8}, f32());
  xb->set_error(invalid_argument("upstream failure"));
  auto wb = upload(*worker, std::vector<float>(128, 1.0f), {8, 16});
  auto o0 = Buffer::pending(*worker, 0, {}, f32());
  auto o1 = Buffer::pending(*worker, 0, {4, 16}, f32());
  Event done;
  (*exe)->execute({xb, wb}, {o0, o1}, done);
  EXPECT_FALSE(done.await().ok());
  EXPECT_FALSE(o0->ready().await().ok());
  EXPECT_FALSE(o1->ready().await().ok());
}

}  // namespace
}  // namespace jaxmlx::runtime
