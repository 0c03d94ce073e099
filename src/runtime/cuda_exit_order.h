// MLX's CUDA backend at process exit: the shared stream's callback thread.
//
// Each of MLX's CUDA command encoders owns a callback thread that MLX detaches. Destroying the
// encoder stops that thread, which then destroys its own CUDA event and stream on its way out.
// The encoder of a thread-unsafe stream (DeviceWorker's shared stream) lives in MLX's static
// map, which exit() destroys among the static destructors; the CUDA runtime's teardown,
// registered earlier when MLX started CUDA, follows right after. A callback thread that is
// still ending then calls into a runtime being torn down: SIGSEGV in about 1 exit in 100 with
// 16 processes at once on an H100 (bench/README.md, thirty-eighth stop). Native MLX code is
// spared because its streams' encoders are thread-local, destroyed before the statics.
//
// new_shared_stream puts a wait between the two: exit() waits (at most a budget) for the
// process to lose the callback threads the map's destructor stopped. Where something else in
// the process made MLX's map first, both handlers run before its destructor: the exit then
// waits out the budget and is not protected.
#ifndef JAXMLX_RUNTIME_CUDA_EXIT_ORDER_H_
#define JAXMLX_RUNTIME_CUDA_EXIT_ORDER_H_

#include <chrono>

#include "mlx/stream.h"

namespace jaxmlx::runtime {

// mx::new_thread_unsafe_stream(dev). On MLX's CUDA backend (`cuda`), first starts MLX's GPU
// scheduler (which starts the CUDA runtime and MLX's handle caches, so their teardown comes
// after the encoder map's destructor), and registers exit handlers on both sides of the
// encoder map's destructor: one before it counts the process's threads, one after it waits
// for that count to drop by the number of streams made here. A forked child skips both.
mlx::core::Stream new_shared_stream(mlx::core::Device dev, bool cuda);

// The number of threads in this process (Linux's /proc/self/task); -1 where it cannot be read.
int count_process_threads();

// Waits until the process has at most `n` threads, up to `budget`; false when it did not
// happen (or the count cannot be read).
bool wait_for_thread_count_at_most(int n, std::chrono::milliseconds budget);

}  // namespace jaxmlx::runtime

#endif  // JAXMLX_RUNTIME_CUDA_EXIT_ORDER_H_
