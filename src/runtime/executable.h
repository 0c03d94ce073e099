// Executable: a compiled program (our IR after passes, checked to be fully lowerable) that runs
// on the device worker, replaying cached MLX graphs on repeated calls.
//
// Thread-safe: execute() may be called from any thread; all MLX work happens on the worker.
// Owned by the PJRT loaded-executable handle (shared with in-flight executions).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "ir/cost.h"
#include "ir/module.h"
#include "runtime/buffer.h"
#include "runtime/device_worker.h"
#include "runtime/event.h"

namespace jaxmlx::runtime {

// The shape of one program input or output, as the PJRT layer reports it.
struct TensorSpec {
  ir::ElementType dtype = ir::ElementType::kF32;
  std::vector<int64_t> dims;
};

class Executable {
 public:
  virtual ~Executable() = default;

  // Takes the module read from the artifact, runs the passes (inline calls, drop sdy sharding
  // ops, fold constants) and checks that every op can be lowered. All unsupported ops are
  // reported at once: UNIMPLEMENTED "2 ops have no MLX lowering:\n  stablehlo.fft (...) at ...".
  static StatusOr<std::shared_ptr<Executable>> compile(std::shared_ptr<DeviceWorker> worker,
                                                       ir::Module module);

  virtual const std::string& name() const = 0;          // the module's name, e.g. "jit_f"
  virtual const std::string& fingerprint() const = 0;   // stable hash of the program
  virtual const std::vector<TensorSpec>& inputs() const = 0;
  virtual const std::vector<TensorSpec>& outputs() const = 0;
  // Printed IR after passes (for PJRT_Executable_OptimizedProgram / debugging).
  virtual std::string program_text() const = 0;
  // The program's cost as XLA's cost analysis counts it (ir/cost.h), counted on the verified
  // program before our passes.
  virtual const ir::Cost& cost() const = 0;

  // Enqueues one run. `inputs` were validated by the caller (count, dtype, shape, not deleted);
  // `outputs` are pending buffers (Buffer::pending) of the output specs, filled by the worker
  // with set_array, or all set_error on failure. `done` fires when the run finished (with the
  // run's error, if any). Never blocks on device work. `donated[i]`: input i is consumed by this
  // run (the caller deletes it): the run takes its array, so MLX may write results into its
  // memory once nothing else reads it.
  virtual void execute(std::vector<std::shared_ptr<Buffer>> inputs,
                       std::vector<std::shared_ptr<Buffer>> outputs, Event done,
                       std::vector<bool> donated = {}) = 0;
};

}  // namespace jaxmlx::runtime
