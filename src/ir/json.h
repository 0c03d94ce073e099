// Normalized JSON of a Module, the form tests/reader/compare.py compares with what jaxlib reads
// from the same artifact. Schema (compare.py documents it too):
//   {"name": str, "module_attrs": {name: value}, "other_ops": [op], "funcs": [func]}
//   func  = {"name", "visibility", "arg_types": [type], "result_types": [type],
//            "arg_attrs": [{..}], "res_attrs": [{..}], "attrs": {..}, "loc": str, "body": region}
//   region = [block];  block = {"args": [[id, type]], "ops": [op]}
//   op    = {"name", "operands": [id], "results": [[id, type]], "attrs": {..},
//            "regions": [region], "loc": "file:line:col" or ""}
//   value = true/false | ["int", type, n] | ["float", type, "0x<bits>"] | ["str", s]
//         | ["sym", s] | ["enum", kind, NAME] | ["i64s", [..]] | ["bools", [..]]
//         | ["dense", type, splat, "<fnv1a64 of bytes>", nbytes, small ints|null] | ["type", type] | ["unit"]
//         | ["array", [value]] | ["dict", {name: value}] | ["opaque", dialect, text]
//         | [struct name, {field: ..}] for gather/scatter/dot/conv/dot_algorithm/channel_handle/
//           result_accuracy/output_operand_alias
// Types are MLIR type strings ("tensor<4x8xf32>"). Ids are our value numbers; compare.py
// renumbers both sides canonically.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ir/module.h"

namespace jaxmlx::ir {

std::string to_json(const Module& m);
// FNV-1a 64-bit hash, as 16 lowercase hex digits (compare.py computes the same).
std::string fnv1a64_hex(std::span<const uint8_t> data);

}  // namespace jaxmlx::ir
