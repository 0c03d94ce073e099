// The VHLO dialect's bytecode encoding: every attribute and type code of VhloBytecode.cpp
// (StableHLO 0.9.0 .. 1.20.0), decoded into plain records that keep nested references as table
// ids (AttrId / TypeId) so decoding stays lazy. vhlo/convert.* turns them into ir values.
//
// Thread-safety: none (the bytecode Reader that calls the hook is single-threaded).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "bytecode/reader.h"

namespace jaxmlx::vhlo {

// Attribute codes (the first varint of a VHLO attribute entry). 0 is unused (a removed attr).
enum class AttrCode : uint8_t {
  kArray = 1, kBoolean = 2, kComparisonDirection = 3, kComparisonType = 4,
  kCustomCallApiVersion = 5, kDictionary = 6, kFftType = 7, kFloat = 8, kInteger = 9,
  kOutputOperandAlias = 10, kPrecision = 11, kRngAlgorithm = 12, kRngDistribution = 13,
  kString = 14, kTensor = 15, kTranspose = 16, kType = 17, kTypeExtensions = 18,
  kResultAccuracyMode = 19, kResultAccuracy = 20, kSubAxisInfo = 21, kAxisRef = 22,
  kReplicaGroupMeshAxes = 23, kMeshAxis = 24, kMesh = 25,
};
inline constexpr int kMaxAttrCode = 25;

// Type codes (the first varint of a VHLO type entry).
enum class TypeCode : uint8_t {
  kBoolean = 0, kComplex = 1, kBF16 = 2, kF16 = 3, kF32 = 4, kF64 = 5, kF8E4M3FN = 6,
  kF8E5M2 = 7, kFunction = 8, kIndex = 9, kSI4 = 10, kSI8 = 11, kSI16 = 12, kSI32 = 13,
  kSI64 = 14, kUI4 = 15, kUI8 = 16, kUI16 = 17, kUI32 = 18, kUI64 = 19, kRankedTensor = 20,
  kRankedTensorWithEncoding = 21, kToken = 22, kTuple = 23, kUniformQuantized = 24,
  kUnrankedTensor = 25, kWitness = 26, kF8E4M3FNUZ = 27, kF8E5M2FNUZ = 28,
  kF8E4M3B11FNUZ = 29, kUniformQuantizedPerAxis = 30, kSI2 = 31, kUI2 = 32, kNone = 33,
  kTF32 = 34, kF8E4M3 = 35, kF8E3M4 = 36, kF4E2M1FN = 37, kF6E2M3FN = 38, kF6E3M2FN = 39,
  kF8E8M0FNU = 40, kRankedBuffer = 41, kFuture = 42,
};
inline constexpr int kMaxTypeCode = 42;

std::string_view attr_code_name(AttrCode c);  // "array_v1", "tensor_v1", ...
std::string_view type_code_name(TypeCode c);  // "f32_v1", "tensor_v1", ...

// A decoded VHLO attribute. Which fields are set depends on `code` (see dialect.cc).
struct VhloAttr : bytecode::DialectObject {
  AttrCode code = AttrCode::kArray;
  std::vector<bytecode::AttrId> items;                                 // array
  std::vector<std::pair<bytecode::AttrId, bytecode::AttrId>> entries;  // dictionary
  uint64_t enum_value = 0;                                             // enums, boolean
  bytecode::TypeId type = bytecode::kNone;  // float/integer/tensor/type
  bytecode::ApInt value;                    // float (bit pattern) / integer
  std::string_view str;                     // string
  std::span<const uint8_t> blob;            // tensor data as stored (i1 possibly bit-packed)
  std::vector<int64_t> ints_a, ints_b;      // alias output/operand tuple indices; bounds
  int64_t int_a = 0, int_b = 0;             // alias operand index; ulps; sub-axis; mesh size
  uint64_t atol_bits = 0, rtol_bits = 0;    // result accuracy (f64 bit patterns)
  bytecode::AttrId ref_a = bytecode::kNone, ref_b = bytecode::kNone;  // nested attrs
};

// A decoded VHLO type.
struct VhloType : bytecode::DialectObject {
  TypeCode code = TypeCode::kF32;
  std::vector<int64_t> shape;                      // ranked tensor / buffer
  bytecode::TypeId element = bytecode::kNone;      // tensor/complex element
  bytecode::AttrId encoding = bytecode::kNone;     // ranked tensor encoding
  std::vector<bytecode::TypeId> inputs, outputs;   // function; tuple/future use `inputs`
  // Uniform quantized (per-tensor and per-axis).
  uint64_t flags = 0;
  bytecode::TypeId storage = bytecode::kNone, expressed = bytecode::kNone;
  int64_t storage_min = 0, storage_max = 0;
  int64_t quantized_dimension = -1;
  std::vector<uint64_t> scale_bits;  // f64 bit patterns
  std::vector<int64_t> zero_points;
};

// Bit width of a VHLO scalar float type code (0 if not a float).
int float_code_width(TypeCode c);
// Bit width of a VHLO integer type code, index included (0 if not an integer).
int integer_code_width(TypeCode c);

// The hook registered for dialect "vhlo" with bytecode::Reader::register_hook.
class VhloHook : public bytecode::DialectHook {
 public:
  StatusOr<std::unique_ptr<bytecode::DialectObject>> read_attribute(
      bytecode::DialectReader& r) override;
  StatusOr<std::unique_ptr<bytecode::DialectObject>> read_type(
      bytecode::DialectReader& r) override;
};

// The VhloAttr / VhloType of a decoded entry, or nullptr if it is not a VHLO one.
const VhloAttr* as_vhlo(const bytecode::Attribute* a);
const VhloType* as_vhlo(const bytecode::Type* t);

}  // namespace jaxmlx::vhlo
