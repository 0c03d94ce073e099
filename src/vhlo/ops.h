// VHLO ops: the table of every versioned op (op_table.def) and the conversion of an op's VHLO
// attributes into the StableHLO-named ir attributes (dimension-number structs, i64 arrays,
// channel handles, symbol references), upgrading older op versions on the way.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "bytecode/reader.h"
#include "ir/module.h"
#include "vhlo/convert.h"

namespace jaxmlx::vhlo {

struct VhloOpInfo {
  std::string_view name;  // "add_v1" (without "vhlo.")
  ir::OpKind kind;
  std::array<int, 3> min_version, max_version;
  std::vector<std::string_view> attrs;         // ODS declaration order
  std::vector<std::string_view> sorted_attrs;  // the order properties store them in
};

// The op called `name` ("add_v1"), or nullptr.
const VhloOpInfo* find_vhlo_op(std::string_view name);
const std::vector<VhloOpInfo>& all_vhlo_ops();

// An op's attributes as stored: (name, attribute id), properties first, then the dictionary.
using RawAttrs = std::vector<std::pair<std::string, bytecode::AttrId>>;

// Converts the attributes of op `info` to ir attributes named as StableHLO names them.
// Unknown (discardable) attributes are converted generically and keep their names.
StatusOr<std::vector<ir::NamedAttribute>> convert_op_attributes(Converter& conv,
                                                                const VhloOpInfo& info,
                                                                const RawAttrs& raw);

}  // namespace jaxmlx::vhlo
