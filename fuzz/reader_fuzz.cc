// libFuzzer target: a StableHLO portable artifact, read into our IR, verified and printed.
//
// read_portable_artifact runs the whole reader (bytecode container, VHLO decoding, IR building);
// the verifier and the printer (with locations) then walk everything it built. Any input must
// end in a module or a Status error; a crash, leak, hang or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "vhlo/read.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto module =
      jaxmlx::vhlo::read_portable_artifact(std::span<const uint8_t>(data, size), nullptr);
  if (!module.ok()) {
    (void)module.status().to_string();
    return 0;
  }
  (void)jaxmlx::ir::verify(*module).to_string();
  jaxmlx::ir::PrintOptions opts;
  opts.locations = true;
  // The text goes nowhere; building it is what exercises the printer.
  volatile size_t n = jaxmlx::ir::print_module(*module, opts).size();
  (void)n;
  return 0;
}
