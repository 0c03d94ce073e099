// MLIR bytecode reader (bytecode versions 0..6), standalone: no LLVM/MLIR dependency.
//
// Reads the container of a StableHLO portable artifact (MLIR bytecode holding the VHLO dialect)
// into a generic form: the string/dialect/op-name tables, the attribute and type tables (decoded
// lazily, memoized), the resources, the properties blobs, and the IR (ops/regions/blocks/values)
// the way the bytecode stores it. Dialect decoding above the builtin dialect is done by hooks
// (vhlo/ registers one); entries of dialects without a hook stay opaque and cost nothing.
//
// Ownership and lifetime: every std::string_view / std::span handed out points into the input
// buffer (or into the Reader), never copied; the Reader keeps `keep_alive` (given to parse())
// alive, and every pointer/span stays valid for the Reader's lifetime.
// Thread-safety: none. Lazy decoding mutates the Reader; callers serialize all access.
// Errors: Status INVALID_ARGUMENT "bytecode: <what> @0x<file offset>: <problem>".
//
// Version history (what each bytecode version changed; see also kVersion* below):
//   v0  base format.
//   v1  dialect versions: the dialect section marks versioned dialects and stores their version
//       blob in a nested section (id 7). Before v1 dialect entries are plain string indices.
//   v2  isolated-from-above regions are encoded inside a nested IR section (lazy loading);
//       we always load them eagerly.
//   v3  use-list orders (ops: mask bit 0x20; blocks with args: one flag byte). Parsed, skipped.
//   v4  the dialect section starts the op-name list with its total count; block-argument
//       locations may be elided (type index carries a has-location flag).
//   v5  native properties: op names carry an "is registered" flag, ops may carry properties
//       (mask bit 0x40), new properties section (id 8).
//   v6  no container change (ODS writes operand/result segment sizes as properties).
//
// StableHLO portable artifacts, as seen in the corpus (StableHLO 0.9 .. 1.20 => bytecode v0..v6):
//   - no dialect carries a version blob; the target version is the producer string
//     ("StableHLO_v1.20.0");
//   - from bytecode v5 on, vhlo ops and builtin.module keep their inherent attributes in native
//     properties (Properties::kNative), not in the attribute dictionary.
//
// CHANGES (after first publication; additions are not listed):
//   - ApInt::words for width > 64 holds only the stored words (missing high words are zero),
//     so a huge declared width cannot make a tiny entry allocate megabytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace jaxmlx::bytecode {

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

inline constexpr uint64_t kMinSupportedVersion = 0;
inline constexpr uint64_t kVersionDialectVersioning = 1;
inline constexpr uint64_t kVersionLazyLoading = 2;
inline constexpr uint64_t kVersionUseListOrdering = 3;
inline constexpr uint64_t kVersionElideUnknownBlockArgLocation = 4;
inline constexpr uint64_t kVersionNativeProperties = 5;
inline constexpr uint64_t kVersionPropertiesSegmentSizes = 6;
inline constexpr uint64_t kMaxSupportedVersion = 6;

// Section ids (the high bit of the id byte is the "has alignment" flag).
enum class SectionId : uint8_t {
  kString = 0,
  kDialect = 1,
  kAttrType = 2,
  kAttrTypeOffset = 3,
  kIR = 4,
  kResource = 5,
  kResourceOffset = 6,
  kDialectVersions = 7,
  kProperties = 8,
};
inline constexpr int kNumSectionIds = 9;

// Table indices. kNone marks "absent" (e.g. an op without an attribute dictionary).
using AttrId = uint32_t;      // index into the attribute table
using TypeId = uint32_t;      // index into the type table
using DialectId = uint32_t;   // index into dialects()
using OpNameId = uint32_t;    // index into op_names()
using ResourceId = uint32_t;  // index into dialect_resources()
using ValueId = uint32_t;     // index into Ir::values
using OpId = uint32_t;        // index into Ir::ops
using BlockId = uint32_t;     // index into Ir::blocks
using RegionId = uint32_t;    // index into Ir::regions
inline constexpr uint32_t kNone = UINT32_MAX;

// ShapedType dynamic dimension marker (MLIR's ShapedType::kDynamic).
inline constexpr int64_t kDynamicDim = INT64_MIN;

// Safety limits; exceeding one is an error naming the limit, never a crash.
struct ReaderOptions {
  uint32_t max_region_depth = 256;     // nesting of regions inside ops
  uint32_t max_attr_depth = 512;       // nesting of attribute/type decoding (a refers to b ...)
  uint64_t max_alignment = 1u << 16;   // largest section / blob alignment accepted
};

// ---------------------------------------------------------------------------------------------
// EncodingReader: bounds-checked primitive reads over a byte range of the input.
// ---------------------------------------------------------------------------------------------

// Reads the primitives of the format. `what` names the region being read ("attr/type section",
// "vhlo attribute #12", ...) and appears in every error together with the absolute file offset.
// Copyable (a copy is an independent cursor over the same bytes).
class EncodingReader {
 public:
  EncodingReader() = default;
  // `data` is the range to read; `file_offset` is the offset of data[0] in the input file (for
  // messages and for alignment, which the format defines relative to the file start).
  EncodingReader(std::span<const uint8_t> data, size_t file_offset, std::string what);

  size_t offset() const { return file_offset_ + pos_; }  // absolute file offset of the cursor
  size_t position() const { return pos_; }                // offset inside `data`
  size_t remaining() const { return data_.size() - pos_; }
  bool empty() const { return pos_ == data_.size(); }
  std::span<const uint8_t> data() const { return data_; }
  std::span<const uint8_t> rest() const { return data_.subspan(pos_); }
  const std::string& what() const { return what_; }

  StatusOr<uint8_t> read_byte();
  // PrefixVarInt: the number of trailing zero bits of the first byte is the number of extra
  // bytes (0x00 => 8 extra bytes, a full 64-bit value). Little-endian.
  StatusOr<uint64_t> read_varint();
  // Zigzag-decoded varint: (v >> 1) ^ -(v & 1).
  StatusOr<int64_t> read_signed_varint();
  // A varint whose low bit is a flag: returns {value >> 1, value & 1}.
  StatusOr<std::pair<uint64_t, bool>> read_varint_with_flag();
  // A varint used as an element count: fails unless count * min_bytes_each <= remaining(), so
  // callers can reserve/allocate `count` elements safely. `what` names the count in errors.
  StatusOr<uint64_t> read_count(std::string_view what, size_t min_bytes_each = 1);
  StatusOr<std::span<const uint8_t>> read_bytes(uint64_t n);
  // A null-terminated string (the terminator is consumed, not returned).
  StatusOr<std::string_view> read_cstring();
  // Skips padding bytes (each must be 0xCB) until offset() is a multiple of `alignment`
  // (a power of two, <= max_alignment).
  Status align_to(uint64_t alignment, uint64_t max_alignment = 1u << 16);
  // A varint length followed by that many bytes ("blob" of the dialect reader; no alignment).
  StatusOr<std::span<const uint8_t>> read_sized_bytes();
  Status skip(uint64_t n);

  // An INVALID_ARGUMENT status "bytecode: <what> @0x<offset()>: <message>".
  Status error(std::string_view message) const;
  Status error_at(size_t file_offset, std::string_view message) const;

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  size_t file_offset_ = 0;
  std::string what_;
};

// ---------------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------------

struct Dialect {
  std::string_view name;
  // The dialect's version blob (bytecode v1+, only if the writer versioned the dialect). VHLO
  // stores its version here. Raw bytes; the dialect defines the encoding.
  std::optional<std::span<const uint8_t>> version;
  size_t version_offset = 0;  // file offset of the version blob (for EncodingReader errors)
};

struct OpName {
  DialectId dialect = kNone;
  std::string_view name;       // without the dialect prefix: "add_v1"
  std::string full_name;       // "vhlo.add_v1"
  std::optional<bool> registered;  // v5+: whether the op was registered when written
};

// One entry of the attribute or type table, as stored.
struct AttrTypeEntry {
  DialectId dialect = kNone;
  bool has_custom_encoding = false;  // false: `data` is the textual assembly form + '\0'
  std::span<const uint8_t> data;
  size_t offset = 0;                 // file offset of data[0]
};

enum class ResourceKind : uint8_t { kBlob = 0, kBool = 1, kString = 2 };

struct Resource {
  std::string_view group;  // provider: dialect name ("builtin") or external group key
  std::string_view key;    // e.g. "dense_resource_blob" / "__elided__"
  ResourceKind kind = ResourceKind::kBlob;
  std::span<const uint8_t> blob;  // kBlob: the payload, in place, aligned per `alignment`
  uint64_t alignment = 1;         // kBlob: alignment requested by the writer
  bool bool_value = false;        // kBool
  std::string_view string_value;  // kString
  bool empty = false;             // entry written with no data (elided)
};

// ---------------------------------------------------------------------------------------------
// Decoded attributes and types
// ---------------------------------------------------------------------------------------------

// Base of what a dialect hook produces (e.g. vhlo/ derives its VHLO attribute/type classes).
class DialectObject {
 public:
  virtual ~DialectObject() = default;
};

enum class Signedness : uint8_t { kSignless = 0, kSigned = 1, kUnsigned = 2 };

enum class FloatKind : uint8_t {
  kBF16, kF16, kF32, kF64, kF80, kF128, kTF32,
  kF8E5M2, kF8E4M3, kF8E4M3FN, kF8E5M2FNUZ, kF8E4M3FNUZ, kF8E4M3B11FNUZ, kF8E3M4, kF8E8M0FNU,
  kF4E2M1FN, kF6E2M3FN, kF6E3M2FN,
};
// Width in bits of a FloatAttr value of this kind (APFloat storage: f80 => 80, tf32 => 19).
uint32_t float_bit_width(FloatKind kind);
std::string_view float_kind_name(FloatKind kind);  // MLIR spelling: "bf16", "f8E4M3FN", ...
std::optional<FloatKind> float_kind_from_name(std::string_view name);

enum class TypeKind : uint8_t {
  kInteger,        // width, signedness
  kIndex,
  kFloat,          // float_kind
  kComplex,        // element
  kNone,           // builtin NoneType
  kFunction,       // inputs, results
  kTuple,          // types
  kRankedTensor,   // shape, element, encoding (kNone if absent)
  kUnrankedTensor, // element
  kVector,         // shape, element, scalable (empty if not scalable)
  kMemRef,         // shape, element, layout, memory_space (kNone if absent)
  kUnrankedMemRef, // element, memory_space
  kDialect,        // decoded by a dialect hook: custom
  kOpaque,         // not decoded: no hook / unknown builtin form; see dialect, asm_text, entry
};

struct Type {
  TypeKind kind = TypeKind::kOpaque;
  DialectId dialect = kNone;
  uint32_t width = 0;                        // kInteger
  Signedness signedness = Signedness::kSignless;
  FloatKind float_kind = FloatKind::kF32;    // kFloat
  std::vector<int64_t> shape;                // tensor/vector/memref; kDynamicDim for '?'
  std::vector<bool> scalable;                // kVector with scalable dims
  TypeId element = kNone;                    // complex/tensor/vector/memref
  AttrId encoding = kNone;                   // kRankedTensor encoding, kMemRef layout
  AttrId memory_space = kNone;               // memref
  std::vector<TypeId> inputs, results;       // kFunction
  std::vector<TypeId> types;                 // kTuple
  std::string_view asm_text;                 // kOpaque stored as text (no trailing '\0')
  std::span<const uint8_t> raw;              // kOpaque with custom encoding: entry bytes
  std::unique_ptr<DialectObject> custom;     // kDialect
};

// An arbitrary-width integer as stored (two's complement, truncated to `width` bits).
struct ApInt {
  uint32_t width = 0;
  // Little-endian 64-bit words; at least 1. For width > 64 only the stored words are kept
  // (up to ceil(width/64)); missing high words are zero.
  std::vector<uint64_t> words;
  uint64_t low() const { return words.empty() ? 0 : words[0]; }
  // Sign-extended value of a width <= 64 integer.
  int64_t as_signed() const;
};

enum class AttrKind : uint8_t {
  kArray,               // elements
  kDictionary,          // named
  kString,              // str, type (kNone when untyped)
  kFlatSymbolRef,       // str (root reference), a = the StringAttr
  kSymbolRef,           // str (root), a = root StringAttr, elements = nested FlatSymbolRefAttrs
  kType,                // type
  kUnit,
  kInteger,             // type, int_value (BoolAttr is an IntegerAttr of i1)
  kFloat,               // type, int_value = bit pattern (width = float_bit_width)
  kDenseArray,          // type = element type, count = number of elements, data
  kDenseElements,       // DenseIntOrFPElementsAttr: type = shaped type, data (see i1 note)
  kDenseStringElements, // type, is_splat, strings
  kDenseResource,       // type, resource
  kSparseElements,      // type, a = indices attr, b = values attr
  kDistinct,            // a = referenced attribute
  kCallSiteLoc,         // a = callee, b = caller
  kFileLineColLoc,      // str = filename, line_col = {line, col} or the range form (1..4 values)
  kFusedLoc,            // elements = locations, a = metadata (kNone if absent)
  kNameLoc,             // str = name, a = child location
  kUnknownLoc,
  kDialect,             // decoded by a dialect hook: custom
  kOpaque,              // not decoded: see dialect, asm_text / raw
};

struct NamedAttr {
  std::string_view name;
  AttrId name_attr = kNone;  // the StringAttr holding the name
  AttrId value = kNone;
};

struct Attribute {
  AttrKind kind = AttrKind::kOpaque;
  DialectId dialect = kNone;
  TypeId type = kNone;
  std::string_view str;
  std::vector<AttrId> elements;
  std::vector<NamedAttr> named;        // kDictionary, in stored order
  ApInt int_value;                     // kInteger / kFloat
  std::span<const uint8_t> data;       // dense payloads, in place
  uint64_t count = 0;                  // kDenseArray element count
  bool is_splat = false;               // kDenseStringElements
  std::vector<std::string_view> strings;  // kDenseStringElements
  ResourceId resource = kNone;         // kDenseResource (index into dialect_resources())
  AttrId a = kNone, b = kNone;         // see AttrKind
  std::vector<uint64_t> line_col;      // kFileLineColLoc: {line, col} (code 11) or range list
  bool is_range = false;               // kFileLineColLoc written as FileLineColRange
  std::string_view asm_text;           // kOpaque stored as text (no trailing '\0')
  std::span<const uint8_t> raw;        // kOpaque with custom encoding: entry bytes
  std::unique_ptr<DialectObject> custom;  // kDialect
};

// i1 dense payloads: writers pack i1 as bits (LSB first); a splat true is the single byte 0xFF,
// and some older writers stored one byte per element. StableHLO's rule: a blob is bit-packed iff
// it is not that splat, size == ceil(n/8) and size != n — so one byte 0x01 for 8 elements is
// bits [1,0,...,0], not a splat. Non-zero byte/bit = true.
bool dense_i1_is_packed(std::span<const uint8_t> blob, uint64_t num_elements);

// ---------------------------------------------------------------------------------------------
// IR
// ---------------------------------------------------------------------------------------------

struct ValueInfo {
  TypeId type = kNone;
  OpId def_op = kNone;        // result of this op, or kNone for a block argument
  BlockId def_block = kNone;  // block argument of this block, or kNone for an op result
  uint32_t index = 0;         // result number / argument number
  AttrId loc = kNone;         // block arguments only; kNone = unknown location (elided, v4+)
};

// Op properties (bytecode v5+).
struct Properties {
  enum class Kind : uint8_t {
    kNone,       // no properties
    kNative,     // registered op: `bytes` is the op's properties blob (decode per op, e.g. with
                 // Reader::properties_reader); `index` is its entry in the properties section
    kAttribute,  // op was unregistered when written: properties stored as attribute `attr`
  };
  Kind kind = Kind::kNone;
  uint64_t index = 0;
  std::span<const uint8_t> bytes;
  size_t offset = 0;  // file offset of bytes[0]
  AttrId attr = kNone;
};

struct Op {
  OpNameId name = kNone;
  AttrId loc = kNone;
  AttrId attrs = kNone;  // the op's attribute dictionary (DictionaryAttr), or kNone
  Properties props;
  std::vector<ValueId> results;
  std::vector<ValueId> operands;
  std::vector<BlockId> successors;
  std::vector<RegionId> regions;
  bool isolated_from_above = false;  // as encoded (only meaningful when regions non-empty)
  BlockId parent = kNone;
  size_t offset = 0;  // file offset of the op's encoding (for messages)
};

struct Block {
  RegionId parent = kNone;
  std::vector<ValueId> args;
  std::vector<OpId> ops;
};

struct Region {
  OpId parent = kNone;
  std::vector<BlockId> blocks;  // empty region: no blocks
};

// The IR section. `top` is the unnamed top-level block (it normally holds one builtin.module).
// Values are numbered globally (ValueId); operands are resolved, forward references included.
struct Ir {
  BlockId top = kNone;
  std::vector<Op> ops;
  std::vector<Block> blocks;
  std::vector<Region> regions;
  std::vector<ValueInfo> values;
};

// ---------------------------------------------------------------------------------------------
// Dialect hooks
// ---------------------------------------------------------------------------------------------

class Reader;
struct ReaderParser;

// What a dialect hook reads with: the entry's bytes plus resolution of nested references.
// Mirrors MLIR's DialectBytecodeReader.
class DialectReader {
 public:
  DialectReader(Reader& reader, EncodingReader stream, DialectId dialect);

  EncodingReader& stream() { return stream_; }
  Reader& reader() { return *reader_; }
  DialectId dialect() const { return dialect_; }
  uint64_t bytecode_version() const;
  // Version blob of the dialect being read (empty if it has none).
  std::span<const uint8_t> dialect_version() const;

  StatusOr<uint8_t> read_byte() { return stream_.read_byte(); }
  StatusOr<uint64_t> read_varint() { return stream_.read_varint(); }
  StatusOr<int64_t> read_signed_varint() { return stream_.read_signed_varint(); }
  StatusOr<std::pair<uint64_t, bool>> read_varint_with_flag() {
    return stream_.read_varint_with_flag();
  }
  // A list length, checked against the remaining bytes (each element >= min_bytes_each).
  StatusOr<uint64_t> read_count(std::string_view what, size_t min_bytes_each = 1) {
    return stream_.read_count(what, min_bytes_each);
  }
  // A string-table reference (varint index).
  StatusOr<std::string_view> read_string();
  // varint size + bytes, in place.
  StatusOr<std::span<const uint8_t>> read_blob() { return stream_.read_sized_bytes(); }
  // Attribute/type references (varint index), bounds-checked, not decoded.
  StatusOr<AttrId> read_attr_id();
  StatusOr<TypeId> read_type_id();
  // MLIR's readOptionalAttribute: varint (index << 1 | present); kNone when absent.
  StatusOr<AttrId> read_optional_attr_id();
  // Reference + decode (memoized; cycles and excessive nesting are errors).
  StatusOr<const Attribute*> read_attribute();
  StatusOr<const Type*> read_type();
  // A dialect resource handle (varint index into Reader::dialect_resources()).
  StatusOr<ResourceId> read_resource_handle();
  // MLIR's readAPIntWithKnownWidth: width <= 8: one byte; <= 64: signed varint; else a word
  // count followed by that many signed varints.
  StatusOr<ApInt> read_apint(uint32_t bit_width);

  Status error(std::string_view message) const { return stream_.error(message); }

 private:
  Reader* reader_;
  EncodingReader stream_;
  DialectId dialect_;
};

// A dialect's decoder. read_* is called with a DialectReader positioned on one entry that has a
// custom encoding; it must consume the whole entry (trailing bytes are an error, as in MLIR).
// Returning nullptr (with OK status) leaves the entry kOpaque. parse_*_asm gets entries stored as
// text (e.g. "#vhlo.foo<...>"); the default keeps them kOpaque.
class DialectHook {
 public:
  virtual ~DialectHook() = default;
  virtual StatusOr<std::unique_ptr<DialectObject>> read_attribute(DialectReader& r) = 0;
  virtual StatusOr<std::unique_ptr<DialectObject>> read_type(DialectReader& r) = 0;
  virtual StatusOr<std::unique_ptr<DialectObject>> parse_attribute_asm(std::string_view text,
                                                                       Reader& reader) {
    return std::unique_ptr<DialectObject>();
  }
  virtual StatusOr<std::unique_ptr<DialectObject>> parse_type_asm(std::string_view text,
                                                                  Reader& reader) {
    return std::unique_ptr<DialectObject>();
  }
};

// ---------------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------------

class Reader {
 public:
  // Parses the container and the IR section eagerly; attributes/types stay undecoded.
  // `data` must stay valid while the Reader lives; `keep_alive` (optional) is held for that.
  // Spans into `data` are address-aligned as the writer intended only if data.data() is aligned
  // to the largest alignment used (64 is always enough in practice); see parse_copy.
  static StatusOr<std::unique_ptr<Reader>> parse(std::span<const uint8_t> data,
                                                 std::shared_ptr<const void> keep_alive = nullptr,
                                                 const ReaderOptions& options = {});
  // Copies `data` into a 64-byte aligned buffer the Reader owns, then parses it.
  static StatusOr<std::unique_ptr<Reader>> parse_copy(std::span<const uint8_t> data,
                                                      const ReaderOptions& options = {});

  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader();

  // Registers the decoder of `dialect` (by name). Affects entries decoded afterwards.
  void register_hook(std::string_view dialect, std::shared_ptr<DialectHook> hook);

  uint64_t version() const { return version_; }
  std::string_view producer() const { return producer_; }
  std::span<const uint8_t> data() const { return data_; }
  const ReaderOptions& options() const { return options_; }

  std::span<const std::string_view> strings() const { return strings_; }
  std::span<const Dialect> dialects() const { return dialects_; }
  std::span<const OpName> op_names() const { return op_names_; }
  // Index of the dialect called `name`, or kNone.
  DialectId find_dialect(std::string_view name) const;

  size_t num_attrs() const { return attr_entries_.size(); }
  size_t num_types() const { return type_entries_.size(); }
  // Raw entries; `id` must be < num_attrs() / num_types() (not checked).
  const AttrTypeEntry& attr_entry(AttrId id) const { return attr_entries_[id]; }
  const AttrTypeEntry& type_entry(TypeId id) const { return type_entries_[id]; }

  // Decodes (once) and returns the attribute/type. Errors are memoized too. An id out of range
  // is an error. The pointer stays valid for the Reader's lifetime.
  StatusOr<const Attribute*> attr(AttrId id);
  StatusOr<const Type*> type(TypeId id);

  // Resources referenced by dialects (dense_resource handles index this list), and resources of
  // external providers (keyed by group), in file order.
  std::span<const Resource> dialect_resources() const { return dialect_resources_; }
  std::span<const Resource> external_resources() const { return external_resources_; }

  // Properties section entries (v5+), in order; Properties::index refers to these.
  std::span<const std::span<const uint8_t>> properties() const { return properties_; }
  size_t properties_offset(size_t index) const { return properties_offsets_[index]; }

  const Ir& ir() const { return ir_; }
  const OpName& op_name(const Op& op) const { return op_names_[op.name]; }

  // A DialectReader over an op's native properties blob (Properties::kNative), bound to the op's
  // dialect. Error if the op has no native properties.
  StatusOr<DialectReader> properties_reader(OpId op);

  // "file:line:col" (innermost file location found, following name/callsite/fused locations),
  // or "" if none; never fails (a broken location yields "").
  std::string location_string(AttrId loc);

  struct Impl;  // internal (decode caches)

 private:
  friend class DialectReader;
  friend struct ReaderParser;
  Reader() = default;

  std::shared_ptr<const void> keep_alive_;
  std::span<const uint8_t> data_;
  ReaderOptions options_;
  uint64_t version_ = 0;
  std::string_view producer_;
  std::vector<std::string_view> strings_;
  std::vector<Dialect> dialects_;
  std::vector<OpName> op_names_;
  std::vector<AttrTypeEntry> attr_entries_;
  std::vector<AttrTypeEntry> type_entries_;
  std::vector<Resource> dialect_resources_;
  std::vector<Resource> external_resources_;
  std::vector<std::span<const uint8_t>> properties_;  // v5+ properties section entries
  std::vector<size_t> properties_offsets_;
  Ir ir_;
  std::vector<std::shared_ptr<DialectHook>> hooks_;  // per DialectId
  std::unique_ptr<Impl> impl_;                       // decode caches
};

}  // namespace jaxmlx::bytecode
