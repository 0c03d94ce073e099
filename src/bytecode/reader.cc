// Reader: header, sections, string/dialect/attr-type/resource/properties tables, lazy decoding.
#include <array>
#include <cstdlib>
#include <cstring>

#include "bytecode/internal.h"

namespace jaxmlx::bytecode {

namespace detail {

std::string section_name(uint8_t id) {
  switch (id) {
    case 0: return "string section";
    case 1: return "dialect section";
    case 2: return "attr/type section";
    case 3: return "attr/type offset section";
    case 4: return "IR section";
    case 5: return "resource section";
    case 6: return "resource offset section";
    case 7: return "dialect version section";
    case 8: return "properties section";
  }
  return "section " + std::to_string(id);
}

StatusOr<Section> read_section(EncodingReader& r, uint64_t max_alignment) {
  Section s;
  size_t at = r.offset();
  ASSIGN_OR_RETURN(uint8_t id_and_align, r.read_byte());
  s.id = id_and_align & 0x7f;
  if (s.id >= kNumSectionIds) return r.error_at(at, "invalid section id " + std::to_string(s.id));
  ASSIGN_OR_RETURN(uint64_t length, r.read_varint());
  if (id_and_align & 0x80) {
    ASSIGN_OR_RETURN(uint64_t alignment, r.read_varint());
    RETURN_IF_ERROR(r.align_to(alignment, max_alignment));
  }
  if (length > r.remaining()) {
    return r.error_at(at, section_name(s.id) + " length " + std::to_string(length) +
                              " overruns the input (" + std::to_string(r.remaining()) +
                              " bytes left)");
  }
  s.offset = r.offset();
  ASSIGN_OR_RETURN(s.data, r.read_bytes(length));
  return s;
}

}  // namespace detail

namespace {

using detail::Section;

// Reads a string-table reference.
StatusOr<std::string_view> read_string_ref(EncodingReader& r,
                                           const std::vector<std::string_view>& strings) {
  size_t at = r.offset();
  ASSIGN_OR_RETURN(uint64_t idx, r.read_varint());
  if (idx >= strings.size()) {
    return r.error_at(at, "string index " + std::to_string(idx) + " out of range (" +
                              std::to_string(strings.size()) + " strings)");
  }
  return strings[idx];
}

StatusOr<uint32_t> read_index(EncodingReader& r, size_t size, std::string_view what) {
  size_t at = r.offset();
  ASSIGN_OR_RETURN(uint64_t idx, r.read_varint());
  if (idx >= size) {
    return r.error_at(at, std::string(what) + " index " + std::to_string(idx) +
                              " out of range (" + std::to_string(size) + " entries)");
  }
  return static_cast<uint32_t>(idx);
}

// The string table: count, lengths in reverse order (each incl. '\0'), then the characters.
Status parse_strings(const Section& s, std::vector<std::string_view>& out) {
  EncodingReader r(s.data, s.offset, "string section");
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("string"));
  std::vector<uint64_t> sizes(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(sizes[n - 1 - i], r.read_varint());
  }
  out.resize(n);
  std::span<const uint8_t> chars = r.rest();
  size_t end = chars.size();
  for (uint64_t i = n; i-- > 0;) {
    uint64_t size = sizes[i];
    if (size == 0 || size > end) {
      return r.error("string #" + std::to_string(i) + " size " + std::to_string(size) +
                     " exceeds the string data");
    }
    size_t begin = end - static_cast<size_t>(size);
    if (chars[end - 1] != 0) {
      return r.error_at(r.offset() + end - 1,
                        "string #" + std::to_string(i) + " is not null-terminated");
    }
    out[i] = std::string_view(reinterpret_cast<const char*>(chars.data()) + begin,
                              static_cast<size_t>(size) - 1);
    end = begin;
  }
  return Status();
}

}  // namespace

// --- Dialect section -------------------------------------------------------------------------

namespace {

// A group: dialect index, entry count, then `each(dialect)` per entry.
template <typename F>
Status parse_dialect_group(EncodingReader& r, size_t num_dialects, F&& each) {
  ASSIGN_OR_RETURN(uint32_t dialect, read_index(r, num_dialects, "dialect"));
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("group entry"));
  for (uint64_t i = 0; i < n; ++i) RETURN_IF_ERROR(each(dialect));
  return Status();
}

}  // namespace

struct ReaderParser {
  Reader& rd;

  Status dialects(const Section& s);
  Status attr_type_offsets(const Section& offsets, const Section& data);
  Status resources(const Section* data, const Section* offsets);
  Status resource_group(EncodingReader& offsets, EncodingReader& data, std::string_view group,
                        std::vector<Resource>& out);
  Status properties(const Section* s);
};

Status ReaderParser::dialects(const Section& s) {
  EncodingReader r(s.data, s.offset, "dialect section");
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("dialect"));
  rd.dialects_.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    Dialect& d = rd.dialects_[i];
    if (rd.version_ < kVersionDialectVersioning) {
      ASSIGN_OR_RETURN(d.name, read_string_ref(r, rd.strings_));
      continue;
    }
    ASSIGN_OR_RETURN(auto name_and_flag, r.read_varint_with_flag());
    if (name_and_flag.first >= rd.strings_.size()) {
      return r.error("dialect name string index " + std::to_string(name_and_flag.first) +
                     " out of range");
    }
    d.name = rd.strings_[name_and_flag.first];
    if (!name_and_flag.second) continue;
    ASSIGN_OR_RETURN(Section v, detail::read_section(r, rd.options_.max_alignment));
    if (v.id != static_cast<uint8_t>(SectionId::kDialectVersions)) {
      return r.error("expected a dialect version section for dialect '" + std::string(d.name) +
                     "', got " + detail::section_name(v.id));
    }
    d.version = v.data;
    d.version_offset = v.offset;
  }
  if (rd.version_ >= kVersionElideUnknownBlockArgLocation) {
    ASSIGN_OR_RETURN(uint64_t num_ops, r.read_count("op name"));
    rd.op_names_.reserve(num_ops);
  }
  auto each = [&](uint32_t dialect) -> Status {
    OpName op;
    op.dialect = dialect;
    if (rd.version_ < kVersionNativeProperties) {
      ASSIGN_OR_RETURN(op.name, read_string_ref(r, rd.strings_));
    } else {
      ASSIGN_OR_RETURN(auto idx_flag, r.read_varint_with_flag());
      if (idx_flag.first >= rd.strings_.size()) return r.error("op name string index out of range");
      op.name = rd.strings_[idx_flag.first];
      op.registered = idx_flag.second;
    }
    op.full_name = std::string(rd.dialects_[dialect].name) + "." + std::string(op.name);
    rd.op_names_.push_back(std::move(op));
    return Status();
  };
  while (!r.empty()) RETURN_IF_ERROR(parse_dialect_group(r, n, each));
  return Status();
}

Status ReaderParser::attr_type_offsets(const Section& offsets, const Section& data) {
  EncodingReader r(offsets.data, offsets.offset, "attr/type offset section");
  ASSIGN_OR_RETURN(uint64_t num_attrs, r.read_count("attribute"));
  ASSIGN_OR_RETURN(uint64_t num_types, r.read_count("type"));
  if (num_attrs + num_types > kNone - 1) return r.error("too many attributes/types");
  rd.attr_entries_.resize(num_attrs);
  rd.type_entries_.resize(num_types);
  uint64_t cur = 0;
  auto fill = [&](std::vector<AttrTypeEntry>& table) -> Status {
    size_t next = 0;
    auto each = [&](uint32_t dialect) -> Status {
      if (next >= table.size()) return r.error("attr/type group has more entries than declared");
      AttrTypeEntry& e = table[next++];
      ASSIGN_OR_RETURN(auto size_flag, r.read_varint_with_flag());
      if (size_flag.first > data.data.size() - cur) {
        return r.error("attr/type entry size " + std::to_string(size_flag.first) +
                       " points past the end of the attr/type section");
      }
      e.dialect = dialect;
      e.has_custom_encoding = size_flag.second;
      e.data = data.data.subspan(cur, size_flag.first);
      e.offset = data.offset + cur;
      cur += size_flag.first;
      return Status();
    };
    while (next < table.size()) {
      RETURN_IF_ERROR(parse_dialect_group(r, rd.dialects_.size(), each));
    }
    return Status();
  };
  RETURN_IF_ERROR(fill(rd.attr_entries_));
  RETURN_IF_ERROR(fill(rd.type_entries_));
  if (!r.empty()) return r.error("unexpected trailing data in the attr/type offset section");
  return Status();
}

Status ReaderParser::resource_group(EncodingReader& offsets, EncodingReader& data,
                                    std::string_view group, std::vector<Resource>& out) {
  ASSIGN_OR_RETURN(uint64_t n, offsets.read_count("resource"));
  for (uint64_t i = 0; i < n; ++i) {
    Resource res;
    res.group = group;
    ASSIGN_OR_RETURN(res.key, read_string_ref(offsets, rd.strings_));
    ASSIGN_OR_RETURN(uint64_t size, offsets.read_varint());
    ASSIGN_OR_RETURN(uint8_t kind, offsets.read_byte());
    if (kind > 2) return offsets.error("unknown resource kind " + std::to_string(kind));
    res.kind = static_cast<ResourceKind>(kind);
    size_t entry_offset = data.offset();
    ASSIGN_OR_RETURN(auto bytes, data.read_bytes(size));
    if (bytes.empty()) {
      res.empty = true;
      out.push_back(res);
      continue;
    }
    EncodingReader e(bytes, entry_offset, "resource '" + std::string(res.key) + "'");
    if (res.kind == ResourceKind::kBlob) {
      ASSIGN_OR_RETURN(res.alignment, e.read_varint());
      ASSIGN_OR_RETURN(uint64_t blob_size, e.read_varint());
      RETURN_IF_ERROR(e.align_to(res.alignment, rd.options_.max_alignment));
      ASSIGN_OR_RETURN(res.blob, e.read_bytes(blob_size));
    } else if (res.kind == ResourceKind::kBool) {
      ASSIGN_OR_RETURN(uint8_t b, e.read_byte());
      res.bool_value = b != 0;
    } else {
      ASSIGN_OR_RETURN(res.string_value, read_string_ref(e, rd.strings_));
    }
    if (!e.empty()) return e.error("unexpected trailing bytes in resource entry");
    out.push_back(res);
  }
  return Status();
}

Status ReaderParser::resources(const Section* data, const Section* offsets) {
  if (data == nullptr && offsets == nullptr) return Status();
  if (data == nullptr || offsets == nullptr) {
    return invalid_argument("bytecode: resource and resource offset sections must both be present");
  }
  EncodingReader o(offsets->data, offsets->offset, "resource offset section");
  EncodingReader d(data->data, data->offset, "resource section");
  ASSIGN_OR_RETURN(uint64_t num_external, o.read_count("external resource group"));
  for (uint64_t i = 0; i < num_external; ++i) {
    ASSIGN_OR_RETURN(std::string_view key, read_string_ref(o, rd.strings_));
    RETURN_IF_ERROR(resource_group(o, d, key, rd.external_resources_));
  }
  while (!o.empty()) {
    ASSIGN_OR_RETURN(uint32_t dialect, read_index(o, rd.dialects_.size(), "dialect"));
    RETURN_IF_ERROR(resource_group(o, d, rd.dialects_[dialect].name, rd.dialect_resources_));
  }
  return Status();
}

// Properties: count, then `count` entries of {varint size, bytes}.
Status ReaderParser::properties(const Section* s) {
  if (s == nullptr || s->data.empty()) return Status();
  EncodingReader r(s->data, s->offset, "properties section");
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("properties entry"));
  rd.properties_.reserve(n);
  rd.properties_offsets_.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(uint64_t size, r.read_varint());
    size_t at = r.offset();
    ASSIGN_OR_RETURN(auto bytes, r.read_bytes(size));
    rd.properties_.push_back(bytes);
    rd.properties_offsets_.push_back(at);
  }
  if (!r.empty()) return r.error("unexpected trailing data in the properties section");
  return Status();
}

// --- Reader ----------------------------------------------------------------------------------

Reader::~Reader() = default;

StatusOr<std::unique_ptr<Reader>> Reader::parse_copy(std::span<const uint8_t> data,
                                                     const ReaderOptions& options) {
  // 64-byte aligned copy, so blob spans are address-aligned as the writer intended.
  auto storage = std::make_shared<std::vector<uint8_t>>(data.size() + 64);
  uintptr_t base = reinterpret_cast<uintptr_t>(storage->data());
  size_t skew = (64 - base % 64) % 64;
  uint8_t* dst = storage->data() + skew;
  if (!data.empty()) std::memcpy(dst, data.data(), data.size());
  return parse(std::span<const uint8_t>(dst, data.size()), storage, options);
}

namespace {

using SectionTable = std::array<std::optional<Section>, kNumSectionIds>;

// Magic, version, producer.
Status parse_header(EncodingReader& r, uint64_t& version, std::string_view& producer) {
  static constexpr uint8_t kMagic[4] = {'M', 'L', 0xEF, 'R'};
  if (r.remaining() < 4) return r.error("input too short for the magic number");
  if (std::memcmp(r.rest().data(), kMagic, 4) != 0) {
    return r.error("bad magic number (not MLIR bytecode)");
  }
  RETURN_IF_ERROR(r.skip(4));
  ASSIGN_OR_RETURN(version, r.read_varint());
  if (version > kMaxSupportedVersion) {
    return r.error_at(4, "unsupported bytecode version " + std::to_string(version) +
                             " (this reader supports " + std::to_string(kMinSupportedVersion) +
                             ".." + std::to_string(kMaxSupportedVersion) + ")");
  }
  ASSIGN_OR_RETURN(producer, r.read_cstring());
  return Status();
}

// The top-level sections: each at most once; the required ones present (as MLIR requires).
Status collect_sections(EncodingReader& body, uint64_t version, uint64_t max_alignment,
                        SectionTable& sections) {
  while (!body.empty()) {
    ASSIGN_OR_RETURN(Section s, detail::read_section(body, max_alignment));
    if (sections[s.id]) return body.error("duplicate top-level " + detail::section_name(s.id));
    sections[s.id] = s;
  }
  for (uint8_t id = 0; id < kNumSectionIds; ++id) {
    bool optional = id == 5 || id == 6 || id == 7 ||
                    (id == 8 && version < kVersionNativeProperties);
    if (!sections[id] && !optional) return body.error("missing " + detail::section_name(id));
  }
  return Status();
}

const Section* opt(const SectionTable& t, int id) { return t[id] ? &*t[id] : nullptr; }

}  // namespace

StatusOr<std::unique_ptr<Reader>> Reader::parse(std::span<const uint8_t> data,
                                                std::shared_ptr<const void> keep_alive,
                                                const ReaderOptions& options) {
  std::unique_ptr<Reader> rd(new Reader());
  rd->keep_alive_ = std::move(keep_alive);
  rd->data_ = data;
  rd->options_ = options;
  rd->impl_ = std::make_unique<Impl>();

  EncodingReader r(data, 0, "header");
  RETURN_IF_ERROR(parse_header(r, rd->version_, rd->producer_));
  SectionTable sections;
  EncodingReader body(r.rest(), r.offset(), "section list");
  RETURN_IF_ERROR(collect_sections(body, rd->version_, options.max_alignment, sections));

  // Order matters: strings first; dialects before anything grouped by dialect.
  ReaderParser p{*rd};
  RETURN_IF_ERROR(parse_strings(*sections[0], rd->strings_));
  RETURN_IF_ERROR(p.properties(opt(sections, 8)));
  RETURN_IF_ERROR(p.dialects(*sections[1]));
  RETURN_IF_ERROR(p.resources(opt(sections, 5), opt(sections, 6)));
  RETURN_IF_ERROR(p.attr_type_offsets(*sections[3], *sections[2]));

  Impl& im = *rd->impl_;
  im.attr_state.assign(rd->attr_entries_.size(), Impl::State::kUndecoded);
  im.type_state.assign(rd->type_entries_.size(), Impl::State::kUndecoded);
  im.attrs.resize(rd->attr_entries_.size());
  im.types.resize(rd->type_entries_.size());
  im.builtin = rd->find_dialect("builtin");
  rd->hooks_.resize(rd->dialects_.size());

  RETURN_IF_ERROR(detail::parse_ir_section(*rd, sections[4]->data, sections[4]->offset, rd->ir_));
  return rd;
}

DialectId Reader::find_dialect(std::string_view name) const {
  for (size_t i = 0; i < dialects_.size(); ++i)
    if (dialects_[i].name == name) return static_cast<DialectId>(i);
  return kNone;
}

void Reader::register_hook(std::string_view dialect, std::shared_ptr<DialectHook> hook) {
  DialectId id = find_dialect(dialect);
  if (id != kNone) hooks_[id] = std::move(hook);
}

StatusOr<DialectReader> Reader::properties_reader(OpId op) {
  if (op >= ir_.ops.size()) return invalid_argument("bytecode: op id out of range");
  const Op& o = ir_.ops[op];
  if (o.props.kind != Properties::Kind::kNative) {
    return invalid_argument("bytecode: op '" + op_names_[o.name].full_name +
                            "' has no native properties");
  }
  EncodingReader r(o.props.bytes, o.props.offset,
                   "properties of '" + op_names_[o.name].full_name + "'");
  return DialectReader(*this, std::move(r), op_names_[o.name].dialect);
}

}  // namespace jaxmlx::bytecode
