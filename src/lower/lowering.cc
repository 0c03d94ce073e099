// LowerContext's error helpers: every refusal names the op and the user's source line.
#include "lower/lowering.h"

namespace jaxmlx::lower {
namespace {

std::string describe(const ir::Op& op, const std::string& reason) {
  std::string s(op.name());
  if (!reason.empty()) s += " (" + reason + ")";
  if (op.loc && op.loc->known()) s += " at " + op.loc->to_string();
  return s;
}

}  // namespace

Status LowerContext::unsupported(const ir::Op& op, const std::string& reason) const {
  return unimplemented(describe(op, reason));
}

Status LowerContext::malformed(const ir::Op& op, const std::string& reason) const {
  return invalid_argument(describe(op, reason));
}

}  // namespace jaxmlx::lower
