// Lazy, memoized attribute/type decoding and the DialectReader handed to dialect hooks.
#include <algorithm>

#include "bytecode/internal.h"

namespace jaxmlx::bytecode {

namespace {

std::string entry_what(const Reader& rd, bool is_attr, uint32_t id, const AttrTypeEntry& e) {
  std::string w = is_attr ? "attribute #" : "type #";
  w += std::to_string(id);
  if (e.dialect < rd.dialects().size()) {
    w += " (";
    w += rd.dialects()[e.dialect].name;
    w += ")";
  }
  return w;
}

Status out_of_range_error(bool is_attr, uint32_t id, size_t size) {
  return invalid_argument(std::string("bytecode: ") + (is_attr ? "attribute" : "type") +
                          " index " + std::to_string(id) + " out of range (" +
                          std::to_string(size) + " entries)");
}

}  // namespace

// One generic driver for both tables: memo state, cycle marker, depth limit, error memo.
template <typename T, typename DecodeFn>
static StatusOr<const T*> memo_decode(Reader::Impl& im, std::vector<Reader::Impl::State>& state,
                                      std::vector<std::unique_ptr<T>>& store,
                                      std::unordered_map<uint32_t, Status>& errors,
                                      uint32_t id, bool is_attr, uint32_t max_depth,
                                      DecodeFn&& decode) {
  using State = Reader::Impl::State;
  if (id >= state.size()) return out_of_range_error(is_attr, id, state.size());
  switch (state[id]) {
    case State::kDone: return static_cast<const T*>(store[id].get());
    case State::kFailed: return errors.at(id);
    case State::kInProgress:
      return invalid_argument(std::string("bytecode: ") + (is_attr ? "attribute #" : "type #") +
                              std::to_string(id) + " refers to itself (cycle)");
    case State::kUndecoded: break;
  }
  if (im.depth >= max_depth) {
    im.depth_limited = true;
    return invalid_argument("bytecode: attribute/type nesting deeper than " +
                            std::to_string(max_depth));
  }
  state[id] = State::kInProgress;
  ++im.depth;
  auto out = std::make_unique<T>();
  Status st = decode(*out);
  --im.depth;
  if (!st.ok()) {
    // A depth failure depends on where decoding started: retry it from a shallower start.
    if (im.depth_limited) {
      state[id] = State::kUndecoded;
    } else {
      state[id] = State::kFailed;
      errors[id] = st;
    }
    if (im.depth == 0) im.depth_limited = false;
    return st;
  }
  store[id] = std::move(out);
  state[id] = State::kDone;
  return static_cast<const T*>(store[id].get());
}

StatusOr<const Attribute*> Reader::attr(AttrId id) {
  Impl& im = *impl_;
  return memo_decode<Attribute>(
      im, im.attr_state, im.attrs, im.attr_errors, id, true, options_.max_attr_depth,
      [&](Attribute& a) -> Status {
        const AttrTypeEntry& e = attr_entries_[id];
        EncodingReader r(e.data, e.offset, entry_what(*this, true, id, e));
        a.dialect = e.dialect;
        DialectHook* hook = hooks_[e.dialect].get();
        if (!e.has_custom_encoding) {
          ASSIGN_OR_RETURN(a.asm_text, r.read_cstring());
          a.kind = AttrKind::kOpaque;
          if (hook != nullptr) {
            ASSIGN_OR_RETURN(auto obj, hook->parse_attribute_asm(a.asm_text, *this));
            if (obj) a.kind = AttrKind::kDialect, a.custom = std::move(obj);
          }
          return Status();
        }
        DialectReader dr(*this, std::move(r), e.dialect);
        if (e.dialect == im.builtin && hook == nullptr) {
          RETURN_IF_ERROR(detail::read_builtin_attr(dr, a));
        } else if (hook != nullptr) {
          ASSIGN_OR_RETURN(auto obj, hook->read_attribute(dr));
          if (!obj) {
            a.kind = AttrKind::kOpaque;
            a.raw = e.data;
            return Status();
          }
          a.kind = AttrKind::kDialect;
          a.custom = std::move(obj);
        } else {
          a.kind = AttrKind::kOpaque;
          a.raw = e.data;
          return Status();
        }
        if (!dr.stream().empty()) return dr.error("unexpected trailing bytes after attribute");
        return Status();
      });
}

StatusOr<const Type*> Reader::type(TypeId id) {
  Impl& im = *impl_;
  return memo_decode<Type>(
      im, im.type_state, im.types, im.type_errors, id, false, options_.max_attr_depth,
      [&](Type& t) -> Status {
        const AttrTypeEntry& e = type_entries_[id];
        EncodingReader r(e.data, e.offset, entry_what(*this, false, id, e));
        t.dialect = e.dialect;
        DialectHook* hook = hooks_[e.dialect].get();
        if (!e.has_custom_encoding) {
          ASSIGN_OR_RETURN(t.asm_text, r.read_cstring());
          t.kind = TypeKind::kOpaque;
          if (e.dialect == im.builtin && hook == nullptr) {
            detail::parse_builtin_type_asm(t.asm_text, t);
          } else if (hook != nullptr) {
            ASSIGN_OR_RETURN(auto obj, hook->parse_type_asm(t.asm_text, *this));
            if (obj) t.kind = TypeKind::kDialect, t.custom = std::move(obj);
          }
          return Status();
        }
        DialectReader dr(*this, std::move(r), e.dialect);
        if (e.dialect == im.builtin && hook == nullptr) {
          RETURN_IF_ERROR(detail::read_builtin_type(dr, t));
        } else if (hook != nullptr) {
          ASSIGN_OR_RETURN(auto obj, hook->read_type(dr));
          if (!obj) {
            t.kind = TypeKind::kOpaque;
            t.raw = e.data;
            return Status();
          }
          t.kind = TypeKind::kDialect;
          t.custom = std::move(obj);
        } else {
          t.kind = TypeKind::kOpaque;
          t.raw = e.data;
          return Status();
        }
        if (!dr.stream().empty()) return dr.error("unexpected trailing bytes after type");
        return Status();
      });
}

// --- DialectReader ---------------------------------------------------------------------------

DialectReader::DialectReader(Reader& reader, EncodingReader stream, DialectId dialect)
    : reader_(&reader), stream_(std::move(stream)), dialect_(dialect) {}

uint64_t DialectReader::bytecode_version() const { return reader_->version(); }

std::span<const uint8_t> DialectReader::dialect_version() const {
  if (dialect_ >= reader_->dialects().size()) return {};
  const auto& v = reader_->dialects()[dialect_].version;
  return v ? *v : std::span<const uint8_t>();
}

StatusOr<std::string_view> DialectReader::read_string() {
  size_t at = stream_.offset();
  ASSIGN_OR_RETURN(uint64_t idx, stream_.read_varint());
  auto strings = reader_->strings();
  if (idx >= strings.size()) {
    return stream_.error_at(at, "string index " + std::to_string(idx) + " out of range (" +
                                    std::to_string(strings.size()) + " strings)");
  }
  return strings[idx];
}

StatusOr<AttrId> DialectReader::read_attr_id() {
  size_t at = stream_.offset();
  ASSIGN_OR_RETURN(uint64_t idx, stream_.read_varint());
  if (idx >= reader_->num_attrs()) {
    return stream_.error_at(at, "attribute index " + std::to_string(idx) + " out of range (" +
                                    std::to_string(reader_->num_attrs()) + " attributes)");
  }
  return static_cast<AttrId>(idx);
}

StatusOr<AttrId> DialectReader::read_optional_attr_id() {
  size_t at = stream_.offset();
  ASSIGN_OR_RETURN(auto idx_flag, stream_.read_varint_with_flag());
  if (!idx_flag.second) return kNone;
  if (idx_flag.first >= reader_->num_attrs()) {
    return stream_.error_at(at, "attribute index " + std::to_string(idx_flag.first) +
                                    " out of range (" + std::to_string(reader_->num_attrs()) +
                                    " attributes)");
  }
  return static_cast<AttrId>(idx_flag.first);
}

StatusOr<TypeId> DialectReader::read_type_id() {
  size_t at = stream_.offset();
  ASSIGN_OR_RETURN(uint64_t idx, stream_.read_varint());
  if (idx >= reader_->num_types()) {
    return stream_.error_at(at, "type index " + std::to_string(idx) + " out of range (" +
                                    std::to_string(reader_->num_types()) + " types)");
  }
  return static_cast<TypeId>(idx);
}

StatusOr<const Attribute*> DialectReader::read_attribute() {
  ASSIGN_OR_RETURN(AttrId id, read_attr_id());
  return reader_->attr(id);
}

StatusOr<const Type*> DialectReader::read_type() {
  ASSIGN_OR_RETURN(TypeId id, read_type_id());
  return reader_->type(id);
}

StatusOr<ResourceId> DialectReader::read_resource_handle() {
  size_t at = stream_.offset();
  ASSIGN_OR_RETURN(uint64_t idx, stream_.read_varint());
  size_t n = reader_->dialect_resources().size();
  if (idx >= n) {
    return stream_.error_at(at, "resource handle " + std::to_string(idx) + " out of range (" +
                                    std::to_string(n) + " resources)");
  }
  return static_cast<ResourceId>(idx);
}

StatusOr<ApInt> DialectReader::read_apint(uint32_t bit_width) {
  ApInt v;
  v.width = bit_width;
  if (bit_width == 0) return stream_.error("integer of width 0");
  if (bit_width <= 8) {
    ASSIGN_OR_RETURN(uint8_t b, stream_.read_byte());
    v.words.push_back(b);
  } else if (bit_width <= 64) {
    ASSIGN_OR_RETURN(int64_t s, stream_.read_signed_varint());
    v.words.push_back(static_cast<uint64_t>(s));
  } else {
    // Only the stored (active) words are kept; higher words are zero, as APInt extends them.
    size_t num_words = (bit_width + 63) / 64;
    ASSIGN_OR_RETURN(uint64_t active, stream_.read_count("integer word"));
    if (active > num_words) return stream_.error("integer has more words than its width allows");
    v.words.assign(std::max<uint64_t>(active, 1), 0);
    for (uint64_t i = 0; i < active; ++i) {
      ASSIGN_OR_RETURN(int64_t s, stream_.read_signed_varint());
      v.words[i] = static_cast<uint64_t>(s);
    }
    if (v.words.size() < num_words) return v;
  }
  // Truncate to the width, as APInt does.
  if (bit_width % 64 != 0) v.words.back() &= (uint64_t{1} << (bit_width % 64)) - 1;
  return v;
}

// --- Locations -------------------------------------------------------------------------------

std::string Reader::location_string(AttrId loc) {
  // Depth-first over name/callsite/fused locations; the first file location wins.
  std::vector<AttrId> todo{loc};
  for (int steps = 0; !todo.empty() && steps < 256; ++steps) {
    AttrId id = todo.back();
    todo.pop_back();
    auto a = attr(id);
    if (!a.ok()) continue;
    const Attribute& at = **a;
    switch (at.kind) {
      case AttrKind::kFileLineColLoc: {
        std::string s(at.str);
        for (size_t i = 0; i < at.line_col.size() && i < 2; ++i)
          s += ":" + std::to_string(at.line_col[i]);
        return s;
      }
      case AttrKind::kNameLoc: todo.push_back(at.a); break;
      case AttrKind::kCallSiteLoc: todo.push_back(at.b), todo.push_back(at.a); break;
      case AttrKind::kFusedLoc:
        for (size_t i = at.elements.size(); i-- > 0 && todo.size() < 1024;)
          todo.push_back(at.elements[i]);
        break;
      default: break;
    }
  }
  return "";
}

}  // namespace jaxmlx::bytecode
