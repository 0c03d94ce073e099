// Lowering rules: collective family (see lowering.h for the rule contract).
//
// The mlx platform runs a program on one device, so every collective has exactly one
// participant (process 0): jax.pmap over one device and jax.shard_map over a 1-device mesh emit
// them with replica groups [[0]]. With one process in its group, all_reduce and reduce_scatter
// reduce a single value (no body call: spec all_reduce, "the result is the operand" for a group
// of one), all_gather / all_to_all concatenate or exchange one piece, and collective_broadcast
// copies from itself: each result is its operand. collective_permute yields its operand when a
// pair (0, 0) sends to itself, else zeros (spec: a process that receives nothing gets zeros).
// replica_id and partition_id are 0. Any group or pair naming another process is refused.
//
// jax from 0.11.2 lowers lax.parallel's asynchronous collectives (psum_start(x).done(), ...) to
// XLA's own custom calls instead of stablehlo.async_start (passes/async_ops.cc): a
// `<collective>-start` whose JSON config (mhlo.frontend_attributes' async_collective_config)
// names the groups or the permutation, and a `<collective>-done` giving the start's value. With
// one participant each is its operand; a collective-permute-start without the pair (0, 0) gives
// zeros.
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower {
namespace {

// OK when the process ids `ids` of groups or pairs (-1 padding allowed; none means "all
// processes") are only process 0; `what` names where they come from.
Status require_single_process(const LowerContext& ctx, const ir::Op& op,
                              const std::vector<int64_t>& ids, const std::string& what) {
  for (int64_t id : ids)
    if (id != 0 && id != -1)
      return ctx.unsupported(op, what + " naming process " + std::to_string(id) +
                                     " (the mlx platform runs one process)");
  return Status();
}

// The same for the [groups, size] dense array attribute `attr`.
Status require_single_process(const LowerContext& ctx, const ir::Op& op, const char* attr) {
  return require_single_process(ctx, op, op.get_i64s(attr), attr);
}

// Every result has its operand's type (true of any collective with one participant).
Status require_same_types(const LowerContext& ctx, const ir::Op& op) {
  if (op.operands.size() != op.results.size())
    return ctx.malformed(op, "operand and result counts differ");
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const ir::Type& a = *op.operands[i].type;
    const ir::Type& r = *op.results[i].type;
    if (a.dtype != r.dtype || a.dims != r.dims)
      return ctx.malformed(op, "result " + std::to_string(i) + " of type " +
                                   ir::type_to_string(r) + " for operand " +
                                   ir::type_to_string(a) + " with one participant");
  }
  return Status();
}

// all_reduce, all_gather, reduce_scatter, all_to_all, collective_broadcast.
StatusOr<Values> lower_single_participant(LowerContext& ctx, const ir::Op& op,
                                          const Values& in) {
  RETURN_IF_ERROR(require_single_process(ctx, op, "replica_groups"));
  if (op.kind == ir::OpKind::kAllToAll && op.get_i64("split_count", 1) != 1)
    return ctx.unsupported(op, "split_count " + std::to_string(op.get_i64("split_count")) +
                                   " (the mlx platform runs one process)");
  RETURN_IF_ERROR(require_same_types(ctx, op));
  return in;
}

StatusOr<Values> lower_collective_permute(LowerContext& ctx, const ir::Op& op,
                                          const Values& in) {
  RETURN_IF_ERROR(require_single_process(ctx, op, "source_target_pairs"));
  RETURN_IF_ERROR(require_same_types(ctx, op));
  if (!op.get_i64s("source_target_pairs").empty()) return in;  // the pair (0, 0)
  return Values{mx::zeros_like(in[0])};
}

// The integers of `key`'s value in an asynchronous collective's JSON config ("replica_groups":
// [[0]] gives {0}); nullopt when the config has no such key or its value is no list.
std::optional<std::vector<int64_t>> config_ints(std::string_view config, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  size_t at = config.find(quoted);
  if (at == std::string_view::npos) return std::nullopt;
  at = config.find_first_not_of(" :", at + quoted.size());
  if (at == std::string_view::npos || config[at] != '[') return std::nullopt;
  const auto digit = [&](size_t k) {
    return k < config.size() && std::isdigit(static_cast<unsigned char>(config[k]));
  };
  std::vector<int64_t> ints;
  int depth = 0;
  for (size_t i = at; i < config.size(); ++i) {
    const char c = config[i];
    if (c == '[') ++depth;
    if (c == ']' && --depth == 0) return ints;
    if (digit(i) || (c == '-' && digit(i + 1))) {
      const bool negative = c == '-';
      size_t end = negative ? i + 1 : i;
      int64_t v = 0;
      for (; digit(end); ++end) v = v > (int64_t{1} << 40) ? v : v * 10 + (config[end] - '0');
      ints.push_back(negative ? -v : v);
      i = end - 1;
    }
  }
  return std::nullopt;  // unclosed
}

// collective-permute-start, all-reduce-start, all-gather-start, reduce-scatter-start,
// all-to-all-start (jax >= 0.11.2).
StatusOr<Values> lower_async_start_call(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1) return ctx.malformed(op, "an asynchronous start of one operand");
  RETURN_IF_ERROR(require_same_types(ctx, op));
  std::string_view config;
  if (const auto* fe = op.attr<ir::DictAttr>("mhlo.frontend_attributes"))
    if (const ir::Attribute* c = fe->find("async_collective_config"))
      if (const auto* s = c->as<ir::StringAttr>()) config = s->value;
  const bool permute = op.get_string("call_target_name") == "collective-permute-start";
  const auto ids = config_ints(config, permute ? "permutation" : "replica_groups");
  if (!ids && permute)
    return ctx.malformed(op, "an async_collective_config without its permutation");
  RETURN_IF_ERROR(require_single_process(ctx, op, ids.value_or(std::vector<int64_t>{}),
                                         "a group or pair"));
  if (permute && ids->empty()) return Values{mx::zeros_like(in[0])};  // no (0, 0): zeros
  return in;
}

StatusOr<Values> lower_async_done_call(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1) return ctx.malformed(op, "an asynchronous done of one operand");
  RETURN_IF_ERROR(require_same_types(ctx, op));
  return in;
}

StatusOr<Values> lower_process_id(LowerContext&, const ir::Op&, const Values&) {
  return Values{int_scalar(0, mx::uint32)};
}

}  // namespace

void register_collective(Registry& r) {
  r.add(ir::OpKind::kAllReduce, lower_single_participant);
  r.add(ir::OpKind::kAllGather, lower_single_participant);
  r.add(ir::OpKind::kReduceScatter, lower_single_participant);
  r.add(ir::OpKind::kAllToAll, lower_single_participant);
  r.add(ir::OpKind::kCollectiveBroadcast, lower_single_participant);
  r.add(ir::OpKind::kCollectivePermute, lower_collective_permute);
  r.add(ir::OpKind::kReplicaId, lower_process_id);
  r.add(ir::OpKind::kPartitionId, lower_process_id);
  for (const char* c : {"collective-permute", "all-reduce", "all-gather", "reduce-scatter",
                        "all-to-all"}) {
    r.add_custom_call(std::string(c) + "-start", lower_async_start_call);
    r.add_custom_call(std::string(c) + "-done", lower_async_done_call);
  }
}

}  // namespace jaxmlx::lower
