// Tests of the bytecode reader: primitives, error paths with their messages, hostile input
// (every prefix, byte flips), and the shared corpus (every StableHLO version, jax artifacts).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "bytecode/reader.h"

namespace jaxmlx::bytecode {
namespace {

using Bytes = std::vector<uint8_t>;

// --- A tiny writer for synthetic inputs -------------------------------------------------------

void put_varint(Bytes& out, uint64_t v) {
  // Smallest PrefixVarInt encoding: n extra bytes hold 7*(n+1) value bits.
  for (unsigned extra = 0; extra < 8; ++extra) {
    unsigned bits = 7 * (extra + 1);
    if (v < (uint64_t{1} << bits)) {
      uint64_t enc = ((v << 1) | 1) << extra;
      for (unsigned i = 0; i <= extra; ++i) out.push_back(static_cast<uint8_t>(enc >> (8 * i)));
      return;
    }
  }
  out.push_back(0);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_section(Bytes& out, uint8_t id, const Bytes& data) {
  out.push_back(id);
  put_varint(out, data.size());
  out.insert(out.end(), data.begin(), data.end());
}

Bytes header(uint64_t version) {
  Bytes b = {'M', 'L', 0xEF, 'R'};
  put_varint(b, version);
  for (char c : std::string("test")) b.push_back(static_cast<uint8_t>(c));
  b.push_back(0);
  return b;
}

Bytes string_section(const std::vector<std::string>& strings) {
  Bytes s;
  put_varint(s, strings.size());
  for (size_t i = strings.size(); i-- > 0;) put_varint(s, strings[i].size() + 1);
  for (const auto& str : strings) {
    s.insert(s.end(), str.begin(), str.end());
    s.push_back(0);
  }
  return s;
}

// A version-0 module: strings {builtin, module}, one dialect, op `builtin.module` with one
// isolated region holding one empty block; attributes are given builtin-encoded entries.
struct Synth {
  std::vector<std::string> strings = {"builtin", "module"};
  std::vector<Bytes> attrs = {{0x1F}};  // #0 = UnknownLoc (code 15)
  std::vector<Bytes> types;
  Bytes ir;  // default: see build()
  uint64_t version = 0;
  Bytes raw_strings;  // replaces the string section when non-empty

  Bytes build() const {
    Bytes out = header(version);
    put_section(out, 0, raw_strings.empty() ? string_section(strings) : raw_strings);
    Bytes dialect;
    put_varint(dialect, 1);  // one dialect: name = string 0
    put_varint(dialect, 0);
    put_varint(dialect, 0);  // op group: dialect 0, 1 op, name = string 1
    put_varint(dialect, 1);
    put_varint(dialect, 1);
    put_section(out, 1, dialect);
    Bytes data, offsets;
    put_varint(offsets, attrs.size());
    put_varint(offsets, types.size());
    for (const auto* table : {&attrs, &types}) {
      if (table->empty()) continue;
      put_varint(offsets, 0);
      put_varint(offsets, table->size());
      for (const Bytes& e : *table) {
        put_varint(offsets, (e.size() << 1) | 1);
        data.insert(data.end(), e.begin(), e.end());
      }
    }
    put_section(out, 2, data);
    put_section(out, 3, offsets);
    Bytes body = ir;
    if (body.empty()) {
      // Top block: 1 op. op: name 0, mask kHasInlineRegions, loc #0, 1 isolated region with
      // one block (0 values) holding no ops.
      body = {};
      put_varint(body, 1 << 1);
      put_varint(body, 0);
      body.push_back(0x10);
      put_varint(body, 0);
      put_varint(body, (1 << 1) | 1);
      put_varint(body, 1);
      put_varint(body, 0);
      put_varint(body, 0);
    }
    put_section(out, 4, body);
    return out;
  }
};

StatusOr<std::unique_ptr<Reader>> parse(const Bytes& b) { return Reader::parse_copy(b); }

std::string error_of(const Bytes& b) {
  auto r = parse(b);
  return r.ok() ? std::string("OK") : r.status().message();
}

// --- Primitives -------------------------------------------------------------------------------

TEST(EncodingReader, VarintRoundTrip) {
  const uint64_t values[] = {0,          1,          127,          128,          16383,
                             16384,      (1u << 21), (1ull << 35), (1ull << 49) - 1,
                             1ull << 56, UINT64_MAX, 0x0123456789abcdefull};
  for (uint64_t v : values) {
    Bytes b;
    put_varint(b, v);
    EncodingReader r(b, 0, "test");
    auto got = r.read_varint();
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, v);
    EXPECT_TRUE(r.empty());
  }
}

TEST(EncodingReader, KnownEncodings) {
  Bytes one = {0x03};  // 1
  EXPECT_EQ(*EncodingReader(one, 0, "t").read_varint(), 1u);
  Bytes two = {0x02, 0x02};  // 2-byte form: (0x0202 >> 2) = 128
  EXPECT_EQ(*EncodingReader(two, 0, "t").read_varint(), 128u);
  Bytes nine = {0x00, 1, 0, 0, 0, 0, 0, 0, 0x80};
  EXPECT_EQ(*EncodingReader(nine, 0, "t").read_varint(), 0x8000000000000001ull);
}

TEST(EncodingReader, SignedVarint) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{-64}, int64_t{1} << 40,
                    INT64_MIN, INT64_MAX}) {
    Bytes b;
    put_varint(b, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
    EncodingReader r(b, 0, "t");
    EXPECT_EQ(*r.read_signed_varint(), v);
  }
}

TEST(EncodingReader, Errors) {
  Bytes truncated = {0x00, 1, 2};
  EncodingReader r(truncated, 0x10, "attr/type section");
  EXPECT_EQ(r.read_varint().status().message(),
            "bytecode: attr/type section @0x10: varint needs 9 bytes, only 3 left");
  Bytes empty;
  EXPECT_EQ(EncodingReader(empty, 4, "x").read_byte().status().message(),
            "bytecode: x @0x4: unexpected end of data reading a byte");
  Bytes nostr = {'a', 'b'};
  EXPECT_EQ(EncodingReader(nostr, 0, "x").read_cstring().status().message(),
            "bytecode: x @0x0: unterminated string");
  Bytes count = {0x0B, 0};  // count 5 with 1 byte left
  EXPECT_EQ(EncodingReader(count, 0, "x").read_count("operand").status().message(),
            "bytecode: x @0x0: operand count 5 exceeds the 1 bytes left");
  Bytes pad = {0xCB, 0x00};
  EncodingReader pr(pad, 1, "x");
  EXPECT_EQ(pr.align_to(4).message(), "bytecode: x @0x2: expected alignment byte 0xcb, got 0x00");
  EXPECT_EQ(EncodingReader(pad, 0, "x").align_to(3).message(),
            "bytecode: x @0x0: alignment 3 is not a power of two");
}

TEST(Helpers, DenseI1Packing) {
  EXPECT_TRUE(dense_i1_is_packed(std::vector<uint8_t>(2, 0x5A), 16));
  EXPECT_FALSE(dense_i1_is_packed(std::vector<uint8_t>(16, 1), 16));
  EXPECT_FALSE(dense_i1_is_packed(std::vector<uint8_t>{0xFF}, 8));  // splat true
  EXPECT_TRUE(dense_i1_is_packed(std::vector<uint8_t>{0x01}, 8));   // bits 1,0,...,0
  EXPECT_FALSE(dense_i1_is_packed(std::vector<uint8_t>{0x01}, 1));  // one element, one byte
  EXPECT_EQ(float_bit_width(FloatKind::kBF16), 16u);
  EXPECT_EQ(float_kind_from_name("f8E4M3FN"), FloatKind::kF8E4M3FN);
}

// --- Container error paths --------------------------------------------------------------------

TEST(ReaderErrors, Header) {
  EXPECT_EQ(error_of({'M', 'L'}), "bytecode: header @0x0: input too short for the magic number");
  EXPECT_EQ(error_of({'M', 'L', 'I', 'R', 1}),
            "bytecode: header @0x0: bad magic number (not MLIR bytecode)");
  Bytes future = header(7);
  EXPECT_EQ(error_of(future),
            "bytecode: header @0x4: unsupported bytecode version 7 (this reader supports 0..6)");
  Bytes noproducer = {'M', 'L', 0xEF, 'R', 0x01, 'a'};
  EXPECT_EQ(error_of(noproducer), "bytecode: header @0x5: unterminated string");
  Bytes longvarint = {'M', 'L', 0xEF, 'R', 0x00, 1};
  EXPECT_EQ(error_of(longvarint), "bytecode: header @0x4: varint needs 9 bytes, only 2 left");
}

TEST(ReaderErrors, Sections) {
  Bytes overrun = header(0);
  overrun.push_back(0);  // string section claiming 100 bytes
  put_varint(overrun, 100);
  overrun.push_back(1);
  EXPECT_EQ(error_of(overrun),
            "bytecode: section list @0xa: string section length 100 overruns the input (1 "
            "bytes left)");
  Bytes bad_id = header(0);
  bad_id.push_back(42);
  EXPECT_EQ(error_of(bad_id), "bytecode: section list @0xa: invalid section id 42");
  Bytes missing = header(0);
  put_section(missing, 0, string_section({}));
  EXPECT_EQ(error_of(missing), "bytecode: section list @0xd: missing dialect section");
  Bytes dup = header(0);
  put_section(dup, 0, string_section({}));
  put_section(dup, 0, string_section({}));
  EXPECT_EQ(error_of(dup), "bytecode: section list @0x10: duplicate top-level string section");
  Synth v5;
  v5.version = 5;
  EXPECT_EQ(error_of(v5.build()), "bytecode: section list @0x39: missing properties section");
}

TEST(ReaderErrors, StringTable) {
  Synth s;
  put_varint(s.raw_strings, 1);
  put_varint(s.raw_strings, 10);  // longer than the data
  s.raw_strings.push_back('a');
  s.raw_strings.push_back(0);
  EXPECT_EQ(error_of(s.build()),
            "bytecode: string section @0xe: string #0 size 10 exceeds the string data");
  Synth t;
  t.raw_strings = {0x03, 0x05, 'a', 'b'};  // one string of size 2 without its terminator
  EXPECT_EQ(error_of(t.build()), "bytecode: string section @0xf: string #0 is not null-terminated");
}

TEST(ReaderErrors, StringIndexOutOfRange) {
  Synth s;
  s.strings = {"builtin"};  // op name string #1 no longer exists
  EXPECT_EQ(error_of(s.build()),
            "bytecode: dialect section @0x1c: string index 1 out of range (1 strings)");
}

TEST(ReaderErrors, OpNameIndexOutOfRange) {
  Synth s;
  put_varint(s.ir, 1 << 1);
  put_varint(s.ir, 3);  // op name #3
  s.ir.push_back(0);    // mask
  put_varint(s.ir, 0);  // location
  EXPECT_EQ(error_of(s.build()).substr(0, 70),
            "bytecode: IR section @0x32: op name index 3 out of range (1 entries)");
}

TEST(ReaderErrors, ForwardReferenceNeverDefined) {
  Synth s;
  // module { ^bb(0 args) with 1 value slot: op module(operand %0) } - %0 never defined.
  put_varint(s.ir, 1 << 1);
  put_varint(s.ir, 0);
  s.ir.push_back(0x10);
  put_varint(s.ir, 0);
  put_varint(s.ir, (1 << 1) | 1);  // 1 isolated region
  put_varint(s.ir, 1);             // 1 block
  put_varint(s.ir, 1);             // 1 value
  put_varint(s.ir, 1 << 1);        // 1 op
  put_varint(s.ir, 0);
  s.ir.push_back(0x04);  // operands
  put_varint(s.ir, 0);
  put_varint(s.ir, 1);
  put_varint(s.ir, 0);  // operand slot 0: forward reference
  std::string e = error_of(s.build());
  EXPECT_NE(e.find("value #0 is used but never defined"), std::string::npos) << e;
}

TEST(ReaderErrors, RegionDepthLimit) {
  Synth s;
  // 300 nested single-region, single-block, single-op levels (non-isolated, v0 inline).
  int depth = 300;
  put_varint(s.ir, 1 << 1);
  for (int i = 0; i < depth; ++i) {
    put_varint(s.ir, 0);
    s.ir.push_back(0x10);
    put_varint(s.ir, 0);
    put_varint(s.ir, 1 << 1);  // 1 region, not isolated
    put_varint(s.ir, 1);       // 1 block
    put_varint(s.ir, 0);       // 0 values
    put_varint(s.ir, 1 << 1);  // 1 op
  }
  std::string e = error_of(s.build());
  EXPECT_NE(e.find("regions nested deeper than 256"), std::string::npos) << e;
}

TEST(ReaderErrors, AttributeCycle) {
  Synth s;
  s.attrs.push_back({0x09, 0x03});  // #1 = FlatSymbolRefAttr(#1): refers to itself
  s.attrs.push_back({0x09, 0x07});  // #2 = FlatSymbolRefAttr(#3): not a StringAttr
  s.attrs.push_back({0x09, 0x09});  // #3 = FlatSymbolRefAttr(#4)
  s.attrs.push_back({0x05, 0x03});  // #4 = StringAttr("module")
  auto r = parse(s.build());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Reader& rd = **r;
  EXPECT_EQ(rd.attr(1).status().message(), "bytecode: attribute #1 refers to itself (cycle)");
  EXPECT_EQ(rd.attr(1).status().message(), "bytecode: attribute #1 refers to itself (cycle)");
  EXPECT_EQ(rd.attr(2).status().message(),
            "bytecode: attribute #2 (builtin) @0x2b: expected a StringAttr reference, got attribute #3");
  auto ok = rd.attr(3);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)->kind, AttrKind::kFlatSymbolRef);
  EXPECT_EQ((*ok)->str, "module");
  EXPECT_EQ(rd.attr(100000).status().message(),
            "bytecode: attribute index 100000 out of range (5 entries)");
}

// Replaces the builtin decoder: an entry is an optional reference that is decoded eagerly.
struct ChainHook : DialectHook {
  StatusOr<std::unique_ptr<DialectObject>> read_attribute(DialectReader& r) override {
    if (!r.stream().empty()) RETURN_IF_ERROR(r.read_attribute().status());
    return std::make_unique<DialectObject>();
  }
  StatusOr<std::unique_ptr<DialectObject>> read_type(DialectReader& r) override {
    return std::unique_ptr<DialectObject>();
  }
};

TEST(ReaderErrors, AttributeNestingDepth) {
  Synth s;
  for (int i = 0; i < 600; ++i) {  // #1.. = reference to the next
    s.attrs.emplace_back();
    put_varint(s.attrs.back(), 2 + i);
  }
  s.attrs.push_back({});  // #601: no reference
  auto r = parse(s.build());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Reader& rd = **r;
  rd.register_hook("builtin", std::make_shared<ChainHook>());
  EXPECT_EQ(rd.attr(1).status().message(), "bytecode: attribute/type nesting deeper than 512");
  auto tail = rd.attr(500);  // 101 levels: fine
  ASSERT_TRUE(tail.ok()) << tail.status().to_string();
  EXPECT_EQ((*tail)->kind, AttrKind::kDialect);
}

TEST(ReaderErrors, BuiltinTrailingBytesAndBadCodes) {
  Synth s;
  s.attrs.push_back({0x1F, 0x01});  // UnknownLoc + a stray byte
  s.attrs.push_back({0x7F});        // code 63
  s.types.push_back({0x51});        // type code 40
  auto r = parse(s.build());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NE((*r)->attr(1).status().message().find("unexpected trailing bytes after attribute"),
            std::string::npos);
  EXPECT_NE((*r)->attr(2).status().message().find("unknown builtin attribute code 63"),
            std::string::npos);
  EXPECT_NE((*r)->type(0).status().message().find("unknown builtin type code 40"),
            std::string::npos);
}

TEST(Reader, SyntheticModule) {
  Synth s;
  s.types.push_back({0x01});  // IntegerType (code 0): (width 32 << 2) | signless
  put_varint(s.types.back(), 32 << 2);
  s.attrs.push_back({0x11, 0x01});  // IntegerAttr (code 8) of type #0
  put_varint(s.attrs.back(), 10);   // zigzag(5)
  auto r = parse(s.build());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Reader& rd = **r;
  EXPECT_EQ(rd.version(), 0u);
  EXPECT_EQ(rd.producer(), "test");
  ASSERT_EQ(rd.ir().ops.size(), 1u);
  EXPECT_EQ(rd.op_name(rd.ir().ops[0]).full_name, "builtin.module");
  EXPECT_EQ(rd.ir().regions.size(), 1u);
  auto t = rd.type(0);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)->kind, TypeKind::kInteger);
  EXPECT_EQ((*t)->width, 32u);
  auto a = rd.attr(1);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ((*a)->kind, AttrKind::kInteger);
  EXPECT_EQ((*a)->int_value.as_signed(), 5);
}

// --- Corpus -----------------------------------------------------------------------------------

std::filesystem::path testdata() {
  const char* env = std::getenv("JAXMLX_TESTDATA");
  return env ? env : JAXMLX_SHARED_TESTDATA;
}

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<std::filesystem::path> corpus() {
  std::vector<std::filesystem::path> out;
  for (const char* dir : {"vhlo", "jax-0.11.2"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(testdata() / dir, ec)) {
      std::string n = e.path().filename().string();
      if (n.ends_with(".mlir.bc") || n.ends_with(".mlirbc")) out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Decodes every attribute and type; returns the number that failed.
int decode_all(Reader& rd) {
  int failed = 0;
  for (size_t i = 0; i < rd.num_attrs(); ++i) failed += !rd.attr(static_cast<AttrId>(i)).ok();
  for (size_t i = 0; i < rd.num_types(); ++i) failed += !rd.type(static_cast<TypeId>(i)).ok();
  return failed;
}

TEST(Corpus, EveryFileParses) {
  auto files = corpus();
  ASSERT_GE(files.size(), 30u) << "testdata not found under " << testdata();
  std::set<uint64_t> versions;
  for (const auto& p : files) {
    SCOPED_TRACE(p.filename().string());
    auto r = Reader::parse_copy(read_file(p));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    Reader& rd = **r;
    versions.insert(rd.version());
    EXPECT_TRUE(rd.producer().starts_with("StableHLO_v"));
    const Ir& ir = rd.ir();
    ASSERT_GE(ir.ops.size(), 4u);
    ASSERT_EQ(ir.blocks[ir.top].ops.size(), 1u);
    EXPECT_EQ(rd.op_name(ir.ops[ir.blocks[ir.top].ops[0]]).full_name, "builtin.module");
    for (const Op& op : ir.ops) {
      const OpName& name = rd.op_name(op);
      ASSERT_LT(name.dialect, rd.dialects().size());
      EXPECT_TRUE(name.full_name == "builtin.module" || name.full_name.starts_with("vhlo."))
          << name.full_name;
      for (ValueId v : op.operands) {
        ASSERT_LT(v, ir.values.size());
        EXPECT_TRUE(ir.values[v].def_op != kNone || ir.values[v].def_block != kNone);
      }
    }
    EXPECT_EQ(decode_all(rd), 0);
    DialectId builtin = rd.find_dialect("builtin");
    for (size_t i = 0; i < rd.num_attrs(); ++i) {
      const Attribute* a = *rd.attr(static_cast<AttrId>(i));
      if (rd.attr_entry(static_cast<AttrId>(i)).dialect == builtin) {
        EXPECT_NE(a->kind, AttrKind::kOpaque) << "builtin attribute #" << i;
      } else {
        EXPECT_EQ(a->kind, AttrKind::kOpaque);  // no vhlo hook registered here
      }
    }
  }
  EXPECT_EQ(versions, (std::set<uint64_t>{0, 1, 3, 4, 6}));
}

// Op counts cross-checked with jaxlib's deserializer (see the report of this reader).
TEST(Corpus, KnownOpCounts) {
  struct Known {
    const char* file;
    size_t ops;
  };
  for (Known k : {Known{"vhlo/stablehlo_legalize_to_vhlo.0_9_0.mlir.bc", 611},
                  Known{"vhlo/stablehlo_legalize_to_vhlo.0_14_0.mlir.bc", 620},
                  Known{"vhlo/stablehlo_legalize_to_vhlo.1_16_0.mlir.bc", 812},
                  Known{"vhlo/stablehlo_legalize_to_vhlo.1_20_0.mlir.bc", 828},
                  Known{"jax-0.11.2/mlp_current.mlirbc", 28}}) {
    auto r = Reader::parse_copy(read_file(testdata() / k.file));
    ASSERT_TRUE(r.ok()) << k.file << ": " << r.status().to_string();
    EXPECT_EQ((*r)->ir().ops.size(), k.ops) << k.file;
  }
}

TEST(Corpus, PropertiesAndLocations) {
  auto r = Reader::parse_copy(read_file(testdata() / "jax-0.11.2/mlp_current.mlirbc"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Reader& rd = **r;
  EXPECT_EQ(rd.version(), 6u);
  int native = 0;
  for (OpId i = 0; i < rd.ir().ops.size(); ++i) {
    const Op& op = rd.ir().ops[i];
    if (op.props.kind != Properties::Kind::kNative) {
      EXPECT_FALSE(rd.properties_reader(i).ok());
      continue;
    }
    ++native;
    auto pr = rd.properties_reader(i);
    ASSERT_TRUE(pr.ok()) << pr.status().to_string();
    EXPECT_EQ(pr->stream().remaining(), op.props.bytes.size());
  }
  EXPECT_GT(native, 0);
  EXPECT_EQ(rd.location_string(rd.ir().ops[2].loc), "-:3:10");
}

// A hook for "vhlo" that swallows the entry; proves hooks are called and nested ids resolve.
struct SwallowHook : DialectHook {
  struct Obj : DialectObject {
    size_t size;
    explicit Obj(size_t s) : size(s) {}
  };
  int calls = 0;
  bool give_null = false;
  StatusOr<std::unique_ptr<DialectObject>> take(DialectReader& r) {
    ++calls;
    size_t n = r.stream().remaining();
    RETURN_IF_ERROR(r.stream().skip(n));
    if (give_null) return std::unique_ptr<DialectObject>();
    return std::unique_ptr<DialectObject>(new Obj(n));
  }
  StatusOr<std::unique_ptr<DialectObject>> read_attribute(DialectReader& r) override {
    return take(r);
  }
  StatusOr<std::unique_ptr<DialectObject>> read_type(DialectReader& r) override {
    return take(r);
  }
};

TEST(Corpus, DialectHook) {
  auto r = Reader::parse_copy(read_file(testdata() / "jax-0.11.2/mlp_current.mlirbc"));
  ASSERT_TRUE(r.ok());
  Reader& rd = **r;
  auto hook = std::make_shared<SwallowHook>();
  rd.register_hook("vhlo", hook);
  EXPECT_EQ(decode_all(rd), 0);
  EXPECT_GT(hook->calls, 0);
  DialectId vhlo = rd.find_dialect("vhlo");
  for (TypeId i = 0; i < rd.num_types(); ++i) {
    if (rd.type_entry(i).dialect != vhlo) continue;
    const Type* t = *rd.type(i);
    ASSERT_EQ(t->kind, TypeKind::kDialect);
    EXPECT_NE(dynamic_cast<const SwallowHook::Obj*>(t->custom.get()), nullptr);
  }
  int before = hook->calls;
  EXPECT_EQ(decode_all(rd), 0);
  EXPECT_EQ(hook->calls, before);  // memoized
}

// --- Builtin encodings, checked value by value at every bytecode version ----------------------
// testdata/builtin_v<N>.mlirbc come from testdata/gen_builtin.py (jaxlib's MLIR writer).

class BuiltinFile : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    std::string path = std::string(JAXMLX_BYTECODE_TESTDATA) + "/builtin_v" +
                       std::to_string(GetParam()) + ".mlirbc";
    auto r = Reader::parse_copy(read_file(path));
    ASSERT_TRUE(r.ok()) << path << ": " << r.status().to_string();
    rd_ = std::move(*r);
    for (const Op& op : rd_->ir().ops) {
      if (rd_->op_name(op).full_name != "test.op") continue;
      auto dict = rd_->attr(op.attrs);
      ASSERT_TRUE(dict.ok()) << dict.status().to_string();
      for (const NamedAttr& na : (*dict)->named) named_[std::string(na.name)] = na.value;
    }
    ASSERT_FALSE(named_.empty());
  }
  const Attribute& attr(const std::string& name) {
    auto a = rd_->attr(named_.at(name));
    EXPECT_TRUE(a.ok()) << name << ": " << a.status().to_string();
    return **a;
  }
  const Type& type(TypeId id) {
    auto t = rd_->type(id);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return **t;
  }
  const Type& type_attr(const std::string& name) { return type(attr(name).type); }
  template <typename T>
  std::vector<T> values(std::span<const uint8_t> data) {
    std::vector<T> out(data.size() / sizeof(T));
    std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
    return out;
  }

  std::unique_ptr<Reader> rd_;
  std::map<std::string, AttrId> named_;
};

TEST_P(BuiltinFile, Scalars) {
  EXPECT_EQ(rd_->version(), static_cast<uint64_t>(GetParam()));
  EXPECT_EQ(decode_all(*rd_), 0);
  EXPECT_EQ(attr("i1t").int_value.low(), 1u);
  EXPECT_EQ(type_attr("i1t").width, 1u);
  EXPECT_EQ(attr("i8v").int_value.as_signed(), -5);
  EXPECT_EQ(attr("i64v").int_value.as_signed(), 1234567890123);
  EXPECT_EQ(type_attr("idx").kind, TypeKind::kIndex);
  EXPECT_EQ(attr("idx").int_value.low(), 7u);
  const Attribute& big = attr("big");
  EXPECT_EQ(big.int_value.width, 128u);
  EXPECT_EQ(type_attr("big").signedness, Signedness::kUnsigned);
  ASSERT_EQ(big.int_value.words.size(), 2u);
  EXPECT_EQ(big.int_value.words[0], UINT64_MAX);
  EXPECT_EQ(big.int_value.words[1], UINT64_MAX);
  EXPECT_EQ(attr("f16v").int_value.low(), 0x3e00u);
  EXPECT_EQ(attr("bf").int_value.low(), 0x4000u);
  EXPECT_EQ(attr("f32v").int_value.low(), 0xbe800000u);
  EXPECT_EQ(attr("f64v").int_value.width, 64u);
  EXPECT_EQ(type_attr("f8").float_kind, FloatKind::kF8E4M3FN);
  EXPECT_EQ(attr("f8").int_value.low(), 0x38u);  // 1.0 in f8E4M3FN
  const Attribute& st = attr("str_typed");
  EXPECT_EQ(st.str, "abc");
  EXPECT_EQ(type(st.type).width, 32u);
  EXPECT_EQ(attr("sym").kind, AttrKind::kFlatSymbolRef);
  EXPECT_EQ(attr("sym").str, "foo");
  const Attribute& nested = attr("nested");
  EXPECT_EQ(nested.kind, AttrKind::kSymbolRef);
  ASSERT_EQ(nested.elements.size(), 1u);
  EXPECT_EQ((*rd_->attr(nested.elements[0]))->str, "bar");
  const Attribute& arr = attr("arr");
  ASSERT_EQ(arr.elements.size(), 3u);
  EXPECT_EQ((*rd_->attr(arr.elements[1]))->str, "s");
  EXPECT_EQ((*rd_->attr(arr.elements[2]))->kind, AttrKind::kUnit);
  EXPECT_EQ(attr("dist").kind, AttrKind::kDistinct);
}

TEST_P(BuiltinFile, Dense) {
  const Attribute& darr = attr("darr");
  EXPECT_EQ(darr.kind, AttrKind::kDenseArray);
  EXPECT_EQ(darr.count, 3u);
  EXPECT_EQ(values<int64_t>(darr.data), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(values<uint8_t>(attr("barr").data), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(values<int32_t>(attr("dense").data), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(values<float>(attr("splat").data), (std::vector<float>{1.0f}));
  const Attribute& bools = attr("bools");
  ASSERT_TRUE(dense_i1_is_packed(bools.data, 9));
  EXPECT_EQ(values<uint8_t>(bools.data), (std::vector<uint8_t>{0x4D, 0x01}));
  const Attribute& strs = attr("strs");
  EXPECT_FALSE(strs.is_splat);
  EXPECT_EQ(strs.strings, (std::vector<std::string_view>{"a", "bc"}));
  EXPECT_TRUE(attr("sstr").is_splat);
  EXPECT_EQ(attr("sstr").strings, (std::vector<std::string_view>{"zz"}));
  const Attribute& res = attr("res");
  ASSERT_EQ(res.kind, AttrKind::kDenseResource);
  const Resource& blob = rd_->dialect_resources()[res.resource];
  EXPECT_EQ(blob.group, "builtin");
  EXPECT_EQ(blob.key, "blob1");
  EXPECT_EQ(blob.alignment, 4u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(blob.blob.data()) % 4, 0u);
  EXPECT_EQ(values<int32_t>(blob.blob), (std::vector<int32_t>{1, 2, 3}));
  const Attribute& sparse = attr("sparse");
  EXPECT_EQ((*rd_->attr(sparse.a))->kind, AttrKind::kDenseElements);
  EXPECT_EQ((*rd_->attr(sparse.b))->kind, AttrKind::kDenseElements);
}

TEST_P(BuiltinFile, Types) {
  const Type& ty = type_attr("ty");
  EXPECT_EQ(ty.kind, TypeKind::kRankedTensor);
  EXPECT_EQ(ty.shape, (std::vector<int64_t>{2, kDynamicDim}));
  EXPECT_EQ(type(ty.element).float_kind, FloatKind::kF32);
  EXPECT_EQ(type(type_attr("cplx").element).kind, TypeKind::kFloat);
  EXPECT_EQ(type_attr("tup").types.size(), 2u);
  EXPECT_EQ(type_attr("fn").inputs.size(), 2u);
  EXPECT_EQ(type_attr("fn").results.size(), 1u);
  EXPECT_EQ(type_attr("vec").kind, TypeKind::kVector);
  EXPECT_EQ(type_attr("ut").kind, TypeKind::kUnrankedTensor);
  const Type& mr = type_attr("mr");
  EXPECT_EQ(mr.kind, TypeKind::kMemRef);
  EXPECT_TRUE((*rd_->attr(mr.encoding))->asm_text.starts_with("affine_map"));
  EXPECT_EQ(type_attr("ui").signedness, Signedness::kUnsigned);
  EXPECT_EQ(type_attr("si").signedness, Signedness::kSigned);
  EXPECT_EQ(type_attr("none").kind, TypeKind::kNone);
  EXPECT_EQ((*rd_->attr(type_attr("enc").encoding))->str, "enc");
  EXPECT_EQ(type_attr("f8t").float_kind, FloatKind::kF8E5M2);
  EXPECT_EQ(type_attr("tf").float_kind, FloatKind::kTF32);
}

TEST_P(BuiltinFile, Locations) {
  std::map<std::string, std::string> locs;
  for (const Op& op : rd_->ir().ops) locs[rd_->op_name(op).full_name] = rd_->location_string(op.loc);
  EXPECT_EQ(locs["test.op"], "model.py:42:7");  // callsite: the callee
  EXPECT_EQ(locs["test.op2"], "a.py:1:2");      // fused
  EXPECT_EQ(locs["test.op3"], "a.py:1:2");      // fused with metadata
  EXPECT_EQ(locs["test.op4"], "c.py:5:6");      // name("named") at c.py
  EXPECT_EQ(locs["test.op5"], "");              // unknown
  EXPECT_EQ(locs["test.op6"], "r.py:1:2");      // FileLineColRange
  const Op& op6 = rd_->ir().ops.back();
  const Attribute& range = **rd_->attr(op6.loc);
  EXPECT_TRUE(range.is_range);
  EXPECT_EQ(range.line_col, (std::vector<uint64_t>{1, 2, 3, 4}));
}

INSTANTIATE_TEST_SUITE_P(AllVersions, BuiltinFile, ::testing::Range(0, 7));

// --- Hostile input ----------------------------------------------------------------------------

TEST(Hostile, EveryPrefixFailsCleanly) {
  Bytes full = read_file(testdata() / "jax-0.11.2/mlp_current.mlirbc");
  ASSERT_FALSE(full.empty());
  for (size_t n = 0; n < full.size(); ++n) {
    Bytes prefix(full.begin(), full.begin() + static_cast<long>(n));
    auto r = Reader::parse_copy(prefix);
    if (r.ok()) {
      decode_all(**r);  // must not crash either
      continue;
    }
    EXPECT_TRUE(r.status().message().starts_with("bytecode: ")) << r.status().message();
  }
  EXPECT_TRUE(Reader::parse_copy(full).ok());
}

TEST(Hostile, ByteFlipsNeverCrash) {
  std::mt19937 rng(1234);
  for (const char* name : {"jax-0.11.2/mlp_current.mlirbc", "jax-0.11.2/mlp_minimum.mlirbc",
                           "vhlo/stablehlo_legalize_to_vhlo.0_14_0.mlir.bc"}) {
    Bytes full = read_file(testdata() / name);
    ASSERT_FALSE(full.empty());
    for (int iter = 0; iter < 1500; ++iter) {
      Bytes b = full;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
      auto r = Reader::parse_copy(b);
      if (r.ok()) {
        decode_all(**r);
        for (const Op& op : (*r)->ir().ops) (*r)->location_string(op.loc);
      }
    }
  }
}

}  // namespace
}  // namespace jaxmlx::bytecode
