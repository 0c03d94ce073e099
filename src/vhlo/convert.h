// Conversion of decoded bytecode attributes/types (VHLO and builtin) into ir values, memoized
// per table id. Used by the op reader (vhlo/read.cc); one Converter per artifact.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "bytecode/reader.h"
#include "ir/module.h"
#include "vhlo/dialect.h"

namespace jaxmlx::vhlo {

class Converter {
 public:
  Converter(bytecode::Reader& reader, ir::Module& module);

  StatusOr<const ir::Type*> type(bytecode::TypeId id);
  // Generic (1:1) conversion: VHLO attributes to their StableHLO/builtin meaning.
  StatusOr<ir::Attribute> attr(bytecode::AttrId id);
  // The decoded VHLO attribute `id`, or an error naming `what` if it is not a VHLO one.
  StatusOr<const VhloAttr*> vhlo_attr(bytecode::AttrId id, std::string_view what);

  // Typed accessors for op attributes; `what` names the attribute in errors.
  StatusOr<int64_t> int_value(bytecode::AttrId id, std::string_view what);
  StatusOr<bool> bool_value(bytecode::AttrId id, std::string_view what);
  StatusOr<std::string> string_value(bytecode::AttrId id, std::string_view what);
  // A 1-D integer tensor_v1 attribute as int64 values (dimension lists).
  StatusOr<std::vector<int64_t>> i64s(bytecode::AttrId id, std::string_view what);
  // A tensor_v1 attribute as dense elements (i1 normalized to one 0/1 byte per element).
  StatusOr<ir::DenseElementsAttr> tensor(bytecode::AttrId id, std::string_view what);
  // A type_v1 attribute's type; nullptr for none_v1 (used by the dot algorithm).
  StatusOr<const ir::Type*> type_attr(bytecode::AttrId id, std::string_view what);

  // The ir location of a builtin location attribute (memoized; unknown on any problem).
  const ir::Location* location(bytecode::AttrId id);

  bytecode::Reader& reader() { return reader_; }
  ir::Module& module() { return module_; }

 private:
  StatusOr<ir::Type> convert_vhlo_type(const VhloType& t);
  StatusOr<ir::Type> convert_builtin_type(const bytecode::Type& t);
  StatusOr<ir::Attribute> convert_vhlo_attr(const VhloAttr& a);
  StatusOr<ir::Attribute> convert_builtin_attr(const bytecode::Attribute& a, bytecode::AttrId id);
  StatusOr<std::string> mesh_text(const VhloAttr& a);
  StatusOr<std::string> mesh_text_of(bytecode::AttrId id);
  StatusOr<ir::DenseElementsAttr> dense(const ir::Type* type, std::span<const uint8_t> blob);
  void collect_location(bytecode::AttrId id, ir::Location& out, int depth, int& budget);

  bytecode::Reader& reader_;
  ir::Module& module_;
  std::vector<const ir::Type*> types_;       // per TypeId, nullptr = not yet converted
  std::vector<const ir::Location*> locs_;    // per AttrId
  int depth_ = 0;                            // nesting of attr()/type() calls
  int attr_depth_ = 0;                       // nesting of attr() calls alone
  int64_t nodes_ = 0;                        // attr() calls under the outermost attr() call
};

}  // namespace jaxmlx::vhlo
