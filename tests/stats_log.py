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
