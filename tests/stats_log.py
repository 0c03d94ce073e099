"""Reading a JAXMLX_GRAPH_STATS log: lines "run <program> <total> <name>=<count> ..." (and
"region ..." lines, skipped)."""

from __future__ import annotations

import collections
import pathlib


def last_run_counts(log: pathlib.Path) -> dict[str, collections.Counter]:
  """Program name -> primitive counts of its last run in `log`; each line's counts must add up
  to its total."""
  out = {}
  for line in log.read_text().splitlines():
    if not line.startswith("run "):
      continue
    _, name, total, *kvs = line.split()
    counts = collections.Counter({k: int(v) for k, v in (kv.rsplit("=", 1) for kv in kvs)})
    assert sum(counts.values()) == int(total), line
    out[name] = counts
  return out


# Elementwise primitive names as MLX writes them into a fused kernel's name ("Compiled" and the
# ops of its tape, ours prefixed "JaxmlxRn1", after a "JaxmlxRn1Defs" of their definitions).
_FUSABLE = ["Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Power", "Negative",
            "Abs", "Sqrt", "Rsqrt", "Exp", "Log", "Tanh", "Sigmoid", "Square", "LogicalNot",
            "LogicalAnd", "LogicalOr", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift",
            "RightShift", "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
            "Select", "AsType", "Broadcast", "Reshape", "Full", "Squeeze", "ExpandDims"]
_LONGEST_FIRST = sorted(_FUSABLE, key=len, reverse=True)


def with_fused_ops(counts: collections.Counter) -> collections.Counter:
  """`counts` with each fused kernel ("Compiled...") also counted as the ops in its name: where a
  GPU fuses a chain, the ops it holds are still found (`Compiled` counts the kernels)."""
  out = collections.Counter(counts)
  for name, n in counts.items():
    if not name.startswith("Compiled"):
      continue
    out["Compiled"] += n
    rest = name[len("Compiled"):].replace("JaxmlxRn1Defs", "").replace("JaxmlxRn1", "")
    while rest:
      op = next((o for o in _LONGEST_FIRST if rest.startswith(o)), None)
      if op is None:  # not an elementwise name we know: skip one character
        rest = rest[1:]
        continue
      out[op] += n
      rest = rest[len(op):]
  return out
