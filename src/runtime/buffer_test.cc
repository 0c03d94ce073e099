#include "runtime/buffer.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "gtest/gtest.h"
#include "mlx/mlx.h"

namespace jaxmlx::runtime {
namespace {

Storage f32() { return Storage{mlx::core::float32, 4, 0}; }

TEST(BufferTest, RoundTripRowMajor) {
  DeviceWorker worker;
  std::vector<float> host(12);
  std::iota(host.begin(), host.end(), 0.f);
  auto b = Buffer::from_host(worker, 11, {3, 4}, f32(), HostView{host.data(), {}},
                             /*copy_now=*/true, Event());
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  ASSERT_TRUE((*b)->ready().await().ok());
  std::vector<float> out(12, -1.f);
  auto ev = (*b)->to_host(out.data(), out.size() * 4, {});
  ASSERT_TRUE(ev.ok());
  ASSERT_TRUE(ev->await().ok());
  EXPECT_EQ(out, host);
}

TEST(BufferTest, StridedHostInputIsGatheredAndHostDoneFires) {
  DeviceWorker worker;
  // A 2x3 view of a 3x2 row-major array transposed: strides (4, 8).
  std::vector<float> host = {0, 1, 2, 3, 4, 5};
  Event host_done;
  auto b = Buffer::from_host(worker, 11, {2, 3}, f32(), HostView{host.data(), {4, 8}},
                             /*copy_now=*/false, host_done);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(host_done.await().ok());
  std::vector<float> out(6);
  auto ev = (*b)->to_host(out.data(), 24, {});
  ASSERT_TRUE(ev.ok() && ev->await().ok());
  EXPECT_EQ(out, (std::vector<float>{0, 2, 4, 1, 3, 5}));
}

TEST(BufferTest, NegativeStridesAndStridedOutput) {
  DeviceWorker worker;
  std::vector<float> host = {0, 1, 2, 3};
  // Reversed view: start at the last element, stride -4.
  auto b = Buffer::from_host(worker, 11, {4}, f32(), HostView{host.data() + 3, {-4}}, true,
                             Event());
  ASSERT_TRUE(b.ok());
  std::vector<float> out(8, -1.f);
  auto ev = (*b)->to_host(out.data(), 32, {8});  // every other slot
  ASSERT_TRUE(ev.ok() && ev->await().ok());
  EXPECT_EQ(out, (std::vector<float>{3, -1, 2, -1, 1, -1, 0, -1}));
}

TEST(BufferTest, DeletedBufferRefusesReads) {
  DeviceWorker worker;
  float one = 1.f;
  auto b = Buffer::from_host(worker, 11, {}, f32(), HostView{&one, {}}, true, Event());
  ASSERT_TRUE(b.ok());
  (*b)->mark_deleted();
  (*b)->mark_deleted();  // idempotent
  float out = 0;
  auto ev = (*b)->to_host(&out, 4, {});
  ASSERT_FALSE(ev.ok());
  EXPECT_NE(ev.status().message().find("deleted"), std::string::npos);
}

TEST(BufferTest, ACompletedRunsArrayIsHandedOnAvailable) {
  // async_eval leaves its evaluation's event on every array it evaluates; once the buffer's
  // ready event says the run is complete (and not before), the next run is given the array
  // marked available, without the event (whose query is a device call on CUDA).
  namespace mx = mlx::core;
  DeviceWorker worker;
  auto b = Buffer::pending(worker, 11, {4}, f32());
  mx::array a = mx::exp(mx::array({1.f, 2.f, 3.f, 4.f}));
  mx::array sibling = mx::sin(mx::array(1.f));  // evaluated with it: the same event
  mx::async_eval({a, sibling});
  b->store_array(a);
  sibling.wait();  // the evaluation is done; `a` still holds the event
  auto before = b->array_on_worker();
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->status(), mx::array::Status::evaluated);
  EXPECT_TRUE(before->event().valid());
  b->ready().set();  // what the run's completion does once its kernels are done
  auto after = b->array_on_worker();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->status(), mx::array::Status::available);
  EXPECT_FALSE(after->event().valid());
  EXPECT_FLOAT_EQ(after->data<float>()[3], std::exp(4.f));
}

TEST(BufferTest, TooSmallDestinationIsAnError) {
  DeviceWorker worker;
  std::vector<float> host(4, 1.f);
  auto b = Buffer::from_host(worker, 11, {4}, f32(), HostView{host.data(), {}}, true, Event());
  ASSERT_TRUE(b.ok());
  std::vector<float> out(2);
  auto ev = (*b)->to_host(out.data(), 8, {});
  ASSERT_FALSE(ev.ok());
  EXPECT_EQ(ev.status().code(), Code::kInvalidArgument);
}

TEST(BufferTest, StridesOfWrongRankAreAnError) {
  DeviceWorker worker;
  std::vector<float> host(4, 1.f);
  auto b = Buffer::from_host(worker, 11, {2, 2}, f32(), HostView{host.data(), {4}}, true, Event());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("rank"), std::string::npos);
}

TEST(BufferTest, WorkerReportsDevice) {
  DeviceWorker worker;
  EXPECT_FALSE(worker.info().kind.empty());
  if (!worker.info().is_gpu) {
    EXPECT_EQ(worker.info().kind, "MLX cpu");
  }
}

}  // namespace
}  // namespace jaxmlx::runtime
