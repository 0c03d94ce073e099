// libFuzzer target: the generic MLIR bytecode reader on arbitrary bytes.
//
// Parses the container, then forces every lazy path (each attribute and type, each op's location
// string and native-properties reader), so a malformed entry anywhere in the tables is decoded.
// Any input must end in OK or a Status error; a crash, leak or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "bytecode/reader.h"

namespace {

void exercise(jaxmlx::bytecode::Reader& r) {
  using jaxmlx::bytecode::OpId;
  for (size_t i = 0; i < r.num_types(); ++i) (void)r.type(static_cast<uint32_t>(i));
  for (size_t i = 0; i < r.num_attrs(); ++i) (void)r.attr(static_cast<uint32_t>(i));
  const auto& ir = r.ir();
  for (size_t i = 0; i < ir.ops.size(); ++i) {
    const auto& op = ir.ops[i];
    if (op.loc != jaxmlx::bytecode::kNone) (void)r.location_string(op.loc);
    if (op.props.kind == jaxmlx::bytecode::Properties::Kind::kNative)
      (void)r.properties_reader(static_cast<OpId>(i));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto reader = jaxmlx::bytecode::Reader::parse_copy(bytes);
  if (reader.ok()) exercise(**reader);
  return 0;
}
