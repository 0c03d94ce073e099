#include "ir/printer.h"

namespace jaxmlx::ir {
namespace {

std::string value_ref(const Value& v) { return "%" + std::to_string(v.id); }

std::string type_or_null(const Type* t) { return t ? type_to_string(*t) : "<<null>>"; }

std::string type_list(const std::vector<Value>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + type_or_null(vs[i].type);
  return s;
}

std::string attrs_text(const std::vector<NamedAttribute>& attrs) {
  if (attrs.empty()) return "";
  std::string s = " {";
  for (size_t i = 0; i < attrs.size(); ++i)
    s += (i ? ", " : "") + attrs[i].name + " = " + attr_to_string(attrs[i].value);
  return s + "}";
}

std::string loc_text(const Location* l) {
  if (!l || !l->known()) return "";
  std::string s = " loc(";
  if (!l->name.empty()) s += "\"" + l->name + "\"";
  if (!l->file.empty()) {
    if (!l->name.empty()) s += " ";
    s += "\"" + l->file + "\":" + std::to_string(l->line) + ":" + std::to_string(l->col);
  }
  return s + ")";
}

class TextPrinter {
 public:
  explicit TextPrinter(const PrintOptions& o) : opts_(o) {}

  void op(const Op& op, int depth) {
    line_start(depth);
    if (!op.results.empty()) {
      for (size_t i = 0; i < op.results.size(); ++i)
        out_ += (i ? ", " : "") + value_ref(op.results[i]);
      out_ += " = ";
    }
    out_ += std::string(op.name()) + "(";
    for (size_t i = 0; i < op.operands.size(); ++i)
      out_ += (i ? ", " : "") + value_ref(op.operands[i]);
    out_ += ")";
    out_ += attrs_text(op.attrs);
    if (!op.regions.empty()) {
      out_ += " (";
      for (size_t r = 0; r < op.regions.size(); ++r) {
        if (r) out_ += ", ";
        region(op.regions[r], depth);
      }
      out_ += ")";
    }
    out_ += " : (" + type_list(op.operands) + ") -> ";
    out_ += op.results.size() == 1 ? type_list(op.results) : "(" + type_list(op.results) + ")";
    if (opts_.locations) out_ += loc_text(op.loc);
    out_ += "\n";
  }

  void region(const Region& r, int depth) {
    out_ += "{\n";
    for (size_t b = 0; b < r.blocks.size(); ++b) {
      const Block& blk = r.blocks[b];
      if (!blk.args.empty() || b > 0) {
        line_start(depth + 1);
        out_ += "^bb" + std::to_string(b) + "(";
        for (size_t i = 0; i < blk.args.size(); ++i)
          out_ += (i ? ", " : "") + value_ref(blk.args[i]) + ": " + type_or_null(blk.args[i].type);
        out_ += "):\n";
      }
      for (const Op& o : blk.ops) op(o, depth + 2);
    }
    line_start(depth + 1);
    out_ += "}";
  }

  void func(const Func& f, int depth) {
    line_start(depth);
    static constexpr std::string_view kVis[] = {"public", "private", "nested"};
    out_ += "func.func " + std::string(kVis[static_cast<int>(f.visibility)]) + " @" + f.name + "(";
    const std::vector<Value>* args = f.body.empty() ? nullptr : &f.args();
    for (size_t i = 0; i < f.arg_types.size(); ++i) {
      out_ += i ? ", " : "";
      out_ += args && i < args->size() ? value_ref((*args)[i]) : "%?";
      out_ += ": " + type_or_null(f.arg_types[i]);
      if (i < f.arg_attrs.size() && !f.arg_attrs[i].entries.empty())
        out_ += " " + attr_to_string(Attribute(f.arg_attrs[i]));
    }
    out_ += ") -> (";
    for (size_t i = 0; i < f.result_types.size(); ++i) {
      out_ += (i ? ", " : "") + type_or_null(f.result_types[i]);
      if (i < f.result_attrs.size() && !f.result_attrs[i].entries.empty())
        out_ += " " + attr_to_string(Attribute(f.result_attrs[i]));
    }
    out_ += ")" + attrs_text(f.attrs);
    if (f.body.empty()) {
      out_ += "\n";
      return;
    }
    out_ += " {";
    if (opts_.locations) out_ += loc_text(f.loc);
    out_ += "\n";
    for (const Op& o : f.entry().ops) op(o, depth + 1);
    line_start(depth);
    out_ += "}\n";
  }

  void module(const Module& m) {
    out_ += "module";
    if (!m.name.empty()) out_ += " @" + m.name;
    if (!m.attrs.empty()) out_ += " attributes" + attrs_text(m.attrs);
    out_ += " {\n";
    for (const Op& o : m.other_ops) op(o, 1);
    for (const Func& f : m.funcs) func(f, 1);
    out_ += "}\n";
  }

  std::string take() { return std::move(out_); }

 private:
  void line_start(int depth) { out_.append(static_cast<size_t>(depth * opts_.indent), ' '); }

  PrintOptions opts_;
  std::string out_;
};

}  // namespace

std::string print_module(const Module& m, const PrintOptions& opts) {
  TextPrinter p(opts);
  p.module(m);
  return p.take();
}

std::string print_func(const Func& f, const PrintOptions& opts) {
  TextPrinter p(opts);
  p.func(f, 0);
  return p.take();
}

std::string print_op(const Op& op, const PrintOptions& opts, int depth) {
  TextPrinter p(opts);
  p.op(op, depth);
  return p.take();
}

std::string describe_op(const Op& op) {
  std::string s(op.name());
  // Enum attributes are what usually explains a gap ("fft_type=IRFFT"); list those only.
  std::string extra;
  for (const NamedAttribute& a : op.attrs)
    if (const EnumAttr* e = a.value.as<EnumAttr>())
      extra += (extra.empty() ? "" : ", ") + a.name + "=" +
               std::string(enum_value_name(e->kind, e->value));
  if (!extra.empty()) s += " (" + extra + ")";
  if (op.loc && op.loc->known()) s += " at " + op.loc->to_string();
  return s;
}

}  // namespace jaxmlx::ir
