// Internals shared by the reader's .cc files (not part of the public API).
#pragma once

#include <unordered_map>

#include "bytecode/reader.h"

namespace jaxmlx::bytecode {

// Lazy decode caches. State per table entry; errors are memoized by index.
struct Reader::Impl {
  enum class State : uint8_t { kUndecoded, kInProgress, kDone, kFailed };
  std::vector<State> attr_state, type_state;
  std::vector<std::unique_ptr<Attribute>> attrs;
  std::vector<std::unique_ptr<Type>> types;
  std::unordered_map<uint32_t, Status> attr_errors, type_errors;
  uint32_t depth = 0;  // current nesting of attr()/type() calls
  bool depth_limited = false;  // the current decode hit max_attr_depth (not memoized)
  DialectId builtin = kNone;
  std::shared_ptr<std::vector<uint8_t>> copy;  // parse_copy's buffer holder (unused otherwise)
};

namespace detail {

// Builtin dialect decoders (builtin.cc). `r` is positioned after nothing: it reads the code.
Status read_builtin_attr(DialectReader& r, Attribute& out);
Status read_builtin_type(DialectReader& r, Type& out);
// Builtin types stored as text (newer float types have no binary encoding): "f8E4M3FN", "i32".
bool parse_builtin_type_asm(std::string_view text, Type& out);

// The IR section (ir_section.cc).
Status parse_ir_section(Reader& reader, std::span<const uint8_t> section, size_t file_offset,
                        Ir& ir);

// Section framing: id byte (high bit = aligned), varint length, [varint alignment, padding].
struct Section {
  uint8_t id = 0;
  std::span<const uint8_t> data;
  size_t offset = 0;  // file offset of data[0]
};
StatusOr<Section> read_section(EncodingReader& r, uint64_t max_alignment);

std::string section_name(uint8_t id);

}  // namespace detail
}  // namespace jaxmlx::bytecode
