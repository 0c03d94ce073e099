// libFuzzer target: parse arbitrary bytes, then decode every attribute/type and location.
// Seed it with ../shared/testdata/vhlo and ../shared/testdata/jax-0.11.2.
#include <cstddef>
#include <cstdint>

#include "bytecode/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace jaxmlx::bytecode;
  auto r = Reader::parse_copy(std::span<const uint8_t>(data, size));
  if (!r.ok()) return 0;
  Reader& rd = **r;
  for (size_t i = 0; i < rd.num_attrs(); ++i) (void)rd.attr(static_cast<AttrId>(i));
  for (size_t i = 0; i < rd.num_types(); ++i) (void)rd.type(static_cast<TypeId>(i));
  for (const Op& op : rd.ir().ops) (void)rd.location_string(op.loc);
  return 0;
}
