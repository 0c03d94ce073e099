// The IR section: ops, regions, blocks and value numbering, read with an explicit stack.
//
// Value numbering (as the writer assigns it): each isolated-from-above op opens a scope; each
// region of the scope reserves `numValues` slots after its parent's, and definitions fill the
// slots in order. Operands name slots of the current scope; a slot not yet defined is a forward
// reference, which we give a ValueId right away and bind when the definition arrives.
#include "bytecode/internal.h"

namespace jaxmlx::bytecode::detail {

namespace {

enum OpMask : uint8_t {
  kHasAttrs = 0x01,
  kHasResults = 0x02,
  kHasOperands = 0x04,
  kHasSuccessors = 0x08,
  kHasInlineRegions = 0x10,
  kHasUseListOrders = 0x20,
  kHasProperties = 0x40,
};

struct ValueScope {
  std::vector<ValueId> slots;         // kNone = not yet referenced
  std::vector<uint64_t> next;         // next slot to define, per open region
};

// One op whose regions are being read (or the top-level pseudo-region).
struct Frame {
  OpId op = kNone;
  bool isolated = false;
  EncodingReader* reader = nullptr;
  std::unique_ptr<EncodingReader> owned;  // v2+: the op's nested IR section
  uint32_t region = 0;                    // index of the current region
  uint32_t num_regions = 0;
  bool in_region = false;                 // header of the current region was read
  uint64_t num_values = 0;                // slots reserved by the current region
  std::vector<BlockId> blocks;            // blocks of the current region
  uint32_t block = 0;                     // current block
  uint64_t ops_left = 0;                  // ops left in the current block
};

class IrParser {
 public:
  IrParser(Reader& rd, Ir& ir) : rd_(rd), ir_(ir) {}
  Status run(std::span<const uint8_t> section, size_t file_offset);

 private:
  Status step(Frame& f);
  Status region_header(Frame& f);
  Status block_header(Frame& f);
  Status block_args(EncodingReader& r, BlockId block);
  Status skip_use_list_orders(EncodingReader& r, uint64_t num_values);
  StatusOr<OpId> op(Frame& f);
  Status op_props(EncodingReader& r, Op& o);
  Status op_results(EncodingReader& r, OpId id, std::vector<ValueInfo>& results);
  StatusOr<Frame> child_frame(Frame& f, OpId id);
  StatusOr<ValueId> operand(EncodingReader& r);
  Status define(EncodingReader& r, std::span<const ValueInfo> infos, std::vector<ValueId>& ids);
  Status push_region_values(EncodingReader& r, uint64_t n);
  Status pop_region_values(EncodingReader& r, uint64_t n);

  StatusOr<uint32_t> index(EncodingReader& r, size_t size, const char* what) {
    size_t at = r.offset();
    ASSIGN_OR_RETURN(uint64_t i, r.read_varint());
    if (i >= size) {
      return r.error_at(at, std::string(what) + " index " + std::to_string(i) +
                                " out of range (" + std::to_string(size) + " entries)");
    }
    return static_cast<uint32_t>(i);
  }

  Reader& rd_;
  Ir& ir_;
  std::vector<Frame> stack_;
  std::vector<ValueScope> scopes_;
  uint64_t unresolved_ = 0;  // forward references not yet defined
  uint64_t total_slots_ = 0;  // value slots reserved by all open regions
  uint64_t section_size_ = 0;
};

Status IrParser::run(std::span<const uint8_t> section, size_t file_offset) {
  EncodingReader main(section, file_offset, "IR section");
  section_size_ = section.size();
  ir_.top = static_cast<BlockId>(ir_.blocks.size());
  ir_.blocks.emplace_back();
  scopes_.emplace_back();
  scopes_.back().next.push_back(0);
  Frame top;
  top.isolated = true;
  top.reader = &main;
  top.num_regions = 1;
  top.in_region = true;
  top.blocks = {ir_.top};
  stack_.push_back(std::move(top));
  RETURN_IF_ERROR(block_header(stack_.back()));
  while (!stack_.empty()) RETURN_IF_ERROR(step(stack_.back()));
  if (unresolved_ != 0) return main.error("unresolved forward value references remain");
  if (!main.empty()) return main.error("unexpected trailing bytes in the IR section");
  return Status();
}

// Reads ops of `f` until its regions end or an op with regions needs a new frame.
Status IrParser::step(Frame& f) {
  for (; f.region < f.num_regions; ++f.region) {
    if (!f.in_region) {
      RETURN_IF_ERROR(region_header(f));
      if (!f.in_region) continue;  // empty region
    }
    while (true) {
      while (f.ops_left > 0) {
        --f.ops_left;
        ASSIGN_OR_RETURN(OpId id, op(f));
        if (ir_.ops[id].regions.empty()) continue;
        ASSIGN_OR_RETURN(Frame child, child_frame(f, id));
        if (child.isolated) scopes_.emplace_back();
        stack_.push_back(std::move(child));  // invalidates `f`
        return Status();
      }
      if (++f.block >= f.blocks.size()) break;
      RETURN_IF_ERROR(block_header(f));
    }
    f.in_region = false;
    RETURN_IF_ERROR(pop_region_values(*f.reader, f.num_values));
  }
  if (f.owned && !f.owned->empty()) {
    return f.owned->error("unexpected trailing bytes in a nested IR section");
  }
  if (f.isolated) scopes_.pop_back();
  stack_.pop_back();
  return Status();
}

// The frame reading op `id`'s regions; v2+ isolated regions live in a nested IR section.
StatusOr<Frame> IrParser::child_frame(Frame& f, OpId id) {
  const Op& o = ir_.ops[id];
  if (stack_.size() >= rd_.options().max_region_depth) {
    return f.reader->error("regions nested deeper than " +
                           std::to_string(rd_.options().max_region_depth));
  }
  Frame child;
  child.op = id;
  child.isolated = o.isolated_from_above;
  child.reader = f.reader;
  child.num_regions = static_cast<uint32_t>(o.regions.size());
  if (rd_.version() >= kVersionLazyLoading && child.isolated) {
    ASSIGN_OR_RETURN(Section s, read_section(*f.reader, rd_.options().max_alignment));
    if (s.id != static_cast<uint8_t>(SectionId::kIR)) {
      return f.reader->error("expected an IR section for the regions of '" +
                             rd_.op_name(o).full_name + "'");
    }
    child.owned = std::make_unique<EncodingReader>(s.data, s.offset, "IR section");
    child.reader = child.owned.get();
  }
  return child;
}

Status IrParser::region_header(Frame& f) {
  EncodingReader& r = *f.reader;
  RegionId rid = ir_.ops[f.op].regions[f.region];
  ASSIGN_OR_RETURN(uint64_t num_blocks, r.read_count("block"));
  if (num_blocks == 0) return Status();
  ASSIGN_OR_RETURN(f.num_values, r.read_varint());
  f.blocks.clear();
  f.blocks.reserve(num_blocks);
  for (uint64_t i = 0; i < num_blocks; ++i) {
    BlockId b = static_cast<BlockId>(ir_.blocks.size());
    ir_.blocks.emplace_back().parent = rid;
    ir_.regions[rid].blocks.push_back(b);
    f.blocks.push_back(b);
  }
  RETURN_IF_ERROR(push_region_values(r, f.num_values));
  f.in_region = true;
  f.block = 0;
  return block_header(f);
}

Status IrParser::push_region_values(EncodingReader& r, uint64_t n) {
  ValueScope& s = scopes_.back();
  // Every value of every open region is defined by at least one distinct byte of the section.
  if (n > section_size_ - total_slots_) {
    return r.error("region declares " + std::to_string(n) + " values, more than the input holds");
  }
  total_slots_ += n;
  s.next.push_back(s.slots.size());
  s.slots.resize(s.slots.size() + n, kNone);
  return Status();
}

Status IrParser::pop_region_values(EncodingReader& r, uint64_t n) {
  ValueScope& s = scopes_.back();
  for (size_t i = s.slots.size() - n; i < s.slots.size(); ++i) {
    ValueId v = s.slots[i];
    if (v != kNone && ir_.values[v].def_op == kNone && ir_.values[v].def_block == kNone) {
      return r.error("value #" + std::to_string(i) + " is used but never defined");
    }
  }
  s.slots.resize(s.slots.size() - n);
  s.next.pop_back();
  total_slots_ -= n;
  return Status();
}

Status IrParser::block_header(Frame& f) {
  EncodingReader& r = *f.reader;
  ASSIGN_OR_RETURN(auto n_args, r.read_varint_with_flag());
  // An op takes at least 3 bytes (name, mask, location).
  if (n_args.first > r.remaining() / 3) return r.error("block op count exceeds the input");
  f.ops_left = n_args.first;
  if (!n_args.second) return Status();
  RETURN_IF_ERROR(block_args(r, f.blocks[f.block]));
  if (rd_.version() < kVersionUseListOrdering) return Status();
  ASSIGN_OR_RETURN(uint8_t has_orders, r.read_byte());
  if (has_orders == 0) return Status();
  return skip_use_list_orders(r, ir_.blocks[f.blocks[f.block]].args.size());
}

Status IrParser::block_args(EncodingReader& r, BlockId block) {
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("block argument"));
  std::vector<ValueInfo> infos(n);
  for (uint64_t i = 0; i < n; ++i) {
    ValueInfo& v = infos[i];
    v.def_block = block;
    v.index = static_cast<uint32_t>(i);
    if (rd_.version() >= kVersionElideUnknownBlockArgLocation) {
      size_t at = r.offset();
      ASSIGN_OR_RETURN(auto type_loc, r.read_varint_with_flag());
      if (type_loc.first >= rd_.num_types()) return r.error_at(at, "type index out of range");
      v.type = static_cast<TypeId>(type_loc.first);
      if (type_loc.second) {
        ASSIGN_OR_RETURN(v.loc, index(r, rd_.num_attrs(), "location attribute"));
      }
    } else {
      ASSIGN_OR_RETURN(v.type, index(r, rd_.num_types(), "type"));
      ASSIGN_OR_RETURN(v.loc, index(r, rd_.num_attrs(), "location attribute"));
    }
  }
  std::vector<ValueId> ids;
  RETURN_IF_ERROR(define(r, infos, ids));
  ir_.blocks[block].args = std::move(ids);
  return Status();
}

Status IrParser::skip_use_list_orders(EncodingReader& r, uint64_t num_values) {
  uint64_t lists = 1;
  if (num_values > 1) {
    ASSIGN_OR_RETURN(lists, r.read_count("use-list order"));
  }
  for (uint64_t i = 0; i < lists; ++i) {
    if (num_values > 1) {
      ASSIGN_OR_RETURN(uint64_t ignored, r.read_varint());
      (void)ignored;
    }
    ASSIGN_OR_RETURN(auto n_pair, r.read_varint_with_flag());
    if (n_pair.first > r.remaining()) return r.error("use-list order length exceeds the input");
    for (uint64_t k = 0; k < n_pair.first; ++k) {
      ASSIGN_OR_RETURN(uint64_t ignored, r.read_varint());
      (void)ignored;
    }
  }
  return Status();
}

StatusOr<ValueId> IrParser::operand(EncodingReader& r) {
  ValueScope& s = scopes_.back();
  ASSIGN_OR_RETURN(uint32_t slot, index(r, s.slots.size(), "value"));
  if (s.slots[slot] == kNone) {  // forward reference
    s.slots[slot] = static_cast<ValueId>(ir_.values.size());
    ir_.values.emplace_back();
    ++unresolved_;
  }
  return s.slots[slot];
}

// Defines values in the next slots of the current region; binds forward references.
Status IrParser::define(EncodingReader& r, std::span<const ValueInfo> infos,
                        std::vector<ValueId>& ids) {
  ValueScope& s = scopes_.back();
  uint64_t& next = s.next.back();
  size_t n = infos.size();
  if (next + n > s.slots.size()) {
    return r.error("value index range [" + std::to_string(next) + ", " +
                   std::to_string(next + n) + ") outside the region's " +
                   std::to_string(s.slots.size()) + " values");
  }
  ids.resize(n);
  for (size_t i = 0; i < n; ++i, ++next) {
    ValueId v = s.slots[next];
    if (v == kNone) {
      v = static_cast<ValueId>(ir_.values.size());
      ir_.values.emplace_back();
      s.slots[next] = v;
    } else if (ir_.values[v].def_op != kNone || ir_.values[v].def_block != kNone) {
      return r.error("value #" + std::to_string(next) + " defined twice");
    } else {
      --unresolved_;
    }
    ir_.values[v] = infos[i];
    ids[i] = v;
  }
  return Status();
}

StatusOr<OpId> IrParser::op(Frame& f) {
  EncodingReader& r = *f.reader;
  OpId id = static_cast<OpId>(ir_.ops.size());
  Op o;
  o.offset = r.offset();
  o.parent = f.blocks[f.block];
  ASSIGN_OR_RETURN(o.name, index(r, rd_.op_names().size(), "op name"));
  ASSIGN_OR_RETURN(uint8_t mask, r.read_byte());
  ASSIGN_OR_RETURN(o.loc, index(r, rd_.num_attrs(), "location attribute"));
  if (mask & kHasAttrs) {
    ASSIGN_OR_RETURN(o.attrs, index(r, rd_.num_attrs(), "attribute dictionary"));
  }
  if (mask & kHasProperties) RETURN_IF_ERROR(op_props(r, o));
  std::vector<ValueInfo> results;
  if (mask & kHasResults) RETURN_IF_ERROR(op_results(r, id, results));
  if (mask & kHasOperands) {
    ASSIGN_OR_RETURN(uint64_t n, r.read_count("operand"));
    o.operands.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(ValueId v, operand(r));
      o.operands.push_back(v);
    }
  }
  if (mask & kHasSuccessors) {
    ASSIGN_OR_RETURN(uint64_t n, r.read_count("successor"));
    for (uint64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(uint32_t b, index(r, f.blocks.size(), "successor block"));
      o.successors.push_back(f.blocks[b]);
    }
  }
  if (rd_.version() >= kVersionUseListOrdering && (mask & kHasUseListOrders)) {
    RETURN_IF_ERROR(skip_use_list_orders(r, results.size()));
  }
  if (mask & kHasInlineRegions) {
    ASSIGN_OR_RETURN(auto n_iso, r.read_varint_with_flag());
    if (n_iso.first > r.remaining()) return r.error("region count exceeds the input");
    o.isolated_from_above = n_iso.second;
    for (uint64_t i = 0; i < n_iso.first; ++i) {
      o.regions.push_back(static_cast<RegionId>(ir_.regions.size()));
      ir_.regions.emplace_back().parent = id;
    }
  }
  RETURN_IF_ERROR(define(r, results, o.results));
  ir_.blocks[o.parent].ops.push_back(id);
  ir_.ops.push_back(std::move(o));
  return id;
}

Status IrParser::op_results(EncodingReader& r, OpId id, std::vector<ValueInfo>& results) {
  ASSIGN_OR_RETURN(uint64_t n, r.read_count("result"));
  results.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(results[i].type, index(r, rd_.num_types(), "result type"));
    results[i].def_op = id;
    results[i].index = static_cast<uint32_t>(i);
  }
  return Status();
}

// v5+: registered ops reference the properties section; unregistered ones store an attribute.
Status IrParser::op_props(EncodingReader& r, Op& o) {
  const OpName& name = rd_.op_names()[o.name];
  if (!name.registered.has_value()) {
    return r.error("op '" + name.full_name + "' has properties but bytecode version " +
                   std::to_string(rd_.version()) + " has no properties");
  }
  if (!*name.registered) {
    o.props.kind = Properties::Kind::kAttribute;
    ASSIGN_OR_RETURN(o.props.attr, index(r, rd_.num_attrs(), "properties attribute"));
    return Status();
  }
  ASSIGN_OR_RETURN(uint32_t idx, index(r, rd_.properties().size(), "properties"));
  o.props.kind = Properties::Kind::kNative;
  o.props.index = idx;
  o.props.bytes = rd_.properties()[idx];
  o.props.offset = rd_.properties_offset(idx);
  return Status();
}

}  // namespace

Status parse_ir_section(Reader& reader, std::span<const uint8_t> section, size_t file_offset,
                        Ir& ir) {
  IrParser p(reader, ir);
  return p.run(section, file_offset);
}

}  // namespace jaxmlx::bytecode::detail
