#include "pjrt/op_log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "ir/types.h"

namespace jaxmlx::pjrt {
namespace {

// "stablehlo.add:f32": the op and the element type it computes in (its first operand's, or its
// first result's for ops without operands).
std::string entry_for(const ir::Op& op) {
  std::string entry(op.name());
  const ir::Type* type = !op.operands.empty() ? op.operands[0].type
                         : !op.results.empty() ? op.results[0].type
                                               : nullptr;
  if (type != nullptr) entry += ":" + std::string(ir::element_type_name(type->dtype));
  return entry;
}

void collect(const ir::Region& region, std::set<std::string>& out) {
  for (const ir::Block& block : region.blocks)
    for (const ir::Op& op : block.ops) {
      out.insert(entry_for(op));
      for (const ir::Region& nested : op.regions) collect(nested, out);
    }
}

}  // namespace

void log_ops_if_requested(const ir::Module& module) {
  static const char* dir = std::getenv("JAXMLX_OP_LOG");
  if (dir == nullptr || *dir == '\0') return;
  std::set<std::string> entries;
  for (const ir::Func& f : module.funcs) collect(f.body, entries);
  std::string line = "ops";
  for (const std::string& e : entries) line += " " + e;
  line += "\n";
  const std::string path = std::string(dir) + "/ops-" + std::to_string(getpid()) + ".log";
  if (std::FILE* f = std::fopen(path.c_str(), "a")) {
    std::fwrite(line.data(), 1, line.size(), f);  // one write per line: lines stay whole
    std::fclose(f);
  }
}

}  // namespace jaxmlx::pjrt
